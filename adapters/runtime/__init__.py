"""The runtime: the command shell, the store and run contexts, workers and run leases."""
