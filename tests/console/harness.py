"""What a console test holds: the client, the store and its runs, and the users' tokens."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

import actae
from tests.console.scenario import Scenario

OPERATOR = "alice"
VIEWER = "victor"


@dataclass
class Console:
    """A running console (through TestClient), its store and data, and its users' tokens."""

    client: TestClient
    store: actae.Store
    scenario: Scenario
    made: dict[str, Any]
    tokens: dict[str, str]
    auth_file: Path

    def bearer(self, name: str = OPERATOR) -> dict[str, str]:
        """The headers of an API client signed in as ``name``."""
        return {"Authorization": f"Bearer {self.tokens[name]}"}
