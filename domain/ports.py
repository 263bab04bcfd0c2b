"""Ports: what the domain needs from the outside world, stated as protocols.

The domain never imports a JSON library or a clock implementation; adapters plug these in.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

Clock = Callable[[], datetime]
"""Returns the current time as a timezone-aware UTC datetime."""


class Codec(Protocol):
    """Turns JSON documents into canonical bytes, the basis of checksums and fingerprints."""

    def canonical(self, value: Any) -> bytes:
        """Encode ``value`` as canonical JSON (sorted keys, no whitespace).

        Raises ``TypeError`` or ``ValueError`` with a readable message when ``value`` holds
        something that is not plain JSON.
        """
        ...

    def canonical_with_hint(self, value: Any) -> tuple[bytes, bool]:
        """``canonical(value)``, and whether an integer beyond +-(2**53 - 1) may be inside.

        The hint is free for the encoder and spares the validation a walk through every
        document to check integer ranges: ``False`` guarantees there is no such integer.
        """
        ...
