"""The odradek command line."""
