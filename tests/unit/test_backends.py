"""One backend per URL: ``memory://`` is SQLite, and only the backend module knows which.

``memory://`` is the SQLite store on a file of its own in memory (tmpfs): every
``actae.open`` makes a new one, and closing the store removes it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import actae
from actae.adapters.persistence.url import parse_store_url
from actae.adapters.runtime.backends import MemoryBackend, SqliteBackend, backend_for

ROOT = Path(__file__).resolve().parents[2]
ASKING = re.compile(
    r"\.backend\s*[!=]=|isinstance\([^)]*(Postgres|SQLite|Sqlite|Memory)\w*(Recorder|Datastore|Models)"
    r"|is_memory|is_sqlite|is_postgres|in_memory\(|\"mode=memory\""
)
"""Ways of asking which database a store is on."""


def test_two_memory_stores_share_nothing() -> None:
    with actae.open("memory://") as one, actae.open("memory://") as two:
        one.start_run("wf", agent_id="a", state={})
        assert len(one.events(None)) > 0
        assert two.events(None) == []


def test_a_memory_store_is_sqlite_and_gone_once_closed() -> None:
    store = actae.open("memory://", create=False)  # there is never one to find: always new
    backend = store._backend
    assert isinstance(backend, MemoryBackend)
    assert isinstance(backend, SqliteBackend)
    store.start_run("wf", agent_id="a", state={})
    assert os.path.isfile(backend.database)
    store.close()
    assert not os.path.exists(os.path.dirname(backend.database))


def test_a_private_sqlite_memory_url_is_a_memory_store() -> None:
    assert isinstance(backend_for(parse_store_url("sqlite:///:memory:")), MemoryBackend)


def test_only_the_backend_module_asks_which_database_it_is() -> None:
    askers = []
    for layer in ("adapters", "actae", "domain", "projections"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            if path.name == "backends.py" and path.parent.name == "runtime":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if ASKING.search(line):
                    askers.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert askers == []
