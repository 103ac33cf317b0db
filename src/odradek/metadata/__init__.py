"""Cluster metadata image built by replaying metadata records."""
