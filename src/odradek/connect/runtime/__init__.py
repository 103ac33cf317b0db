"""Workers, the REST API, task threads and the internal topics."""
