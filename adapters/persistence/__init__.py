"""Persistence: the codec, store URLs, table migrations, the recorders and the event log."""
