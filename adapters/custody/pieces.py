"""How artifact bytes are cut: 1 MiB chunks, so a gigabyte never sits in memory."""

from __future__ import annotations

from collections.abc import Callable

CHUNK_SIZE = 1 << 20
"""Plaintext bytes per chunk: large enough that per-row and per-call costs vanish next to
the copying, small enough that a few of them in flight stay far below any memory limit."""

BlobName = Callable[[], str]
"""Gives a blob's name, called once its chunks have all been consumed: an artifact is named
by its digest, which is known only at the end of the stream."""
