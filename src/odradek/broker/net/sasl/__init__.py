"""SASL on the broker: the per-connection authenticator, its mechanisms, JAAS and settings."""
