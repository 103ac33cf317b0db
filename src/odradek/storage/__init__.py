"""The partition log: segments, indexes, checkpoints (sync file IO through a seam)."""
