"""An in-process broker for users' test suites."""
