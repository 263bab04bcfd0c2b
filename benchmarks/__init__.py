"""Benchmarks: Actae against a raw psycopg baseline measured in the same run."""
