"""The replica wing: partitions, their logs' writer, replica fetchers, ISR
changes and log moves."""
