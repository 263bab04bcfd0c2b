"""Custody of the agents' data: keys, encryption at rest, artifacts, forgetting (docs/data.md).

Contents can be sealed under their run's key, moved out of large rows, and destroyed by
forgetting the key; the log's structure stays in clear for leases, read models and analysts.
"""
