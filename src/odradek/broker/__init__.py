"""The IO shell: asyncio server, one handler module per API, purgatory."""
