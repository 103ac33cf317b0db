"""Partition replication state: leader epoch, ISR, high watermark (pure)."""
