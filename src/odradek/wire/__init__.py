"""Pure protocol: primitives, generated messages, api table, frames, record batches.

Nothing here does IO; bytes in, values out.
"""
