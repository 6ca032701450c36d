"""`make bench`: the figures of issue 3 on the embedded stack with an instant fake model.

``python -m tests.bench [--quick] [--profile] [--out bench-results]`` writes
``<out>/latest.json`` (every figure) and ``<out>/latest.md`` (the issue's targets, PASS/MISS).
The ``agent=N`` stacks run one process per service (``--processes``, as in earlier runs); the
``modes`` section compares the embedded modes, one-process (the default) and ``--processes``.
"""
