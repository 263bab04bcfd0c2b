"""The ``actae`` command line."""
