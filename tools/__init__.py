"""Developer tools (code generation, golden-frame capture, fuzzers). Not part of the installed package."""
