"""The runtime: the sync shell and the store façade, run contexts, workers, leases, the clock.

Also what a process does when the database goes away (``outages``) and its logging.
"""
