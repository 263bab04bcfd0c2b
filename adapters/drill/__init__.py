"""The failure drill and the demo.

Real worker processes, a fake payment provider, crash points and database faults.
"""
