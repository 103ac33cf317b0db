"""Developer tools (code generation). Not part of the installed package."""
