"""Mutation testing of the modules where a silent bug costs most (issue 24, item 3).

``python -m tests.mutation`` (``make mutation``, opt-in, not in `make test` or CI) runs mutmut
over each module of :mod:`tests.mutation.modules` against that module's own tests and writes the
kill rate per module to ``bench-results/mutation.json`` (docs/mutation.md).
"""
