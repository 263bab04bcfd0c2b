"""The failure drill and the demo: real worker processes, a fake provider, crash points, faults."""
