"""Developer tools: code generation, golden-frame capture, fuzzers.

Not part of the installed package; run from the repository root
(``python -m tools.codegen``, ``python -m tools.capture_frames``,
``python -m tools.fuzz.wire``).
"""
