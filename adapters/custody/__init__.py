"""Custody of the agents' data: keys, encryption at rest, artifacts, forgetting.

Everything an agent produces (payloads, states, step and effect results) can be sealed under
its run's own data key, moved out of the event rows when it is large, and destroyed by
forgetting the key, while the log's structure (ids, kinds, cursors, versions, times) stays
in clear for leases, read models and analysts.
"""
