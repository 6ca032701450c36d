"""The fault campaign (issue 24, item 4): ``python -m tests.soak`` (``make soak``) and its short
variant in ``make test`` (test_soak.py). docs/soak.md says what it proves and how."""
