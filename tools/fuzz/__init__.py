"""Seeded fuzzers of the decoders; long runs, not part of the pytest run.

One module per fuzzer, each run from the repository root::

    python -m tools.fuzz.wire --cases 100000 [--seed 1] [--only CASE]     # the request path
    python -m tools.fuzz.records --cases 100000 [--seed 1] [--only CASE]  # record decoders

``tests/unit/test_wire_fuzz.py`` runs a short Hypothesis version of the first
in the test suite.
"""
