"""The drill's outside world: a mock payment provider and a mock LLM, in their own process.

It keeps its own ledger (SQLite) of every request, so the drill's report counts charges and
model calls from the provider's side, not from anything Actae says. Payments are
idempotent by the ``Idempotency-Key`` header and answer ``429`` with ``Retry-After: 30`` to
the first two attempts of each key; model answers are randomly sampled, so a re-run would be
a visibly different answer and a second call under the same key.

Run: ``python -m actae.adapters.drill_provider LEDGER.db`` — prints ``port <n>``.
"""

from __future__ import annotations

import json
import random
import sqlite3
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

THROTTLED_ATTEMPTS = 2
RETRY_AFTER = 30
LLM_COST = 0.8  # dollars per call, as in the seed's "$0.80 research call"


class Ledger:
    """The provider's own records."""

    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._db.executescript(
            "CREATE TABLE IF NOT EXISTS requests (id INTEGER PRIMARY KEY, kind TEXT, key TEXT, "
            "status INTEGER, clock TEXT, body TEXT);"
            "CREATE TABLE IF NOT EXISTS charges (key TEXT PRIMARY KEY, invoice TEXT, "
            "amount INTEGER, charge_id TEXT);"
        )

    def charge(self, key: str, clock: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Throttle the first attempts of a key, then charge once per key."""
        with self._lock:
            (attempts,) = self._db.execute(
                "SELECT count(*) FROM requests WHERE kind = 'charge' AND key = ?", (key,)
            ).fetchone()
            if attempts < THROTTLED_ATTEMPTS:
                self._log("charge", key, 429, clock, body)
                return 429, {"error": "rate limited"}
            charge_id = f"ch_{abs(hash(key)) % 10**8}"
            self._db.execute(
                "INSERT OR IGNORE INTO charges VALUES (?, ?, ?, ?)",
                (key, body.get("invoice"), body.get("amount"), charge_id),
            )
            self._log("charge", key, 200, clock, body)
            return 200, self.lookup(key) or {}

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The charge made under ``key``."""
        row = self._db.execute(
            "SELECT key, invoice, amount, charge_id FROM charges WHERE key = ?", (key,)
        ).fetchone()
        return (
            None
            if row is None
            else dict(zip(("key", "invoice", "amount", "charge_id"), row, strict=True))
        )

    def llm(self, key: str, clock: str, body: dict[str, Any]) -> dict[str, Any]:
        """A sampled answer; every call is logged, re-runs included."""
        sample = random.randint(1, 10**6)  # noqa: S311 - a stand-in model, not crypto
        tokens = random.randint(400, 1200)  # noqa: S311
        answer = {
            "text": f"{body.get('prompt', '')}: option {sample}",
            "tokens": tokens,
            "cost": LLM_COST,
        }
        with self._lock:
            self._log("llm", key, 200, clock, body)
        return answer

    def dump(self) -> dict[str, Any]:
        """Everything the provider saw."""
        with self._lock:
            requests = [
                dict(zip(("id", "kind", "key", "status", "clock", "body"), row, strict=True))
                for row in self._db.execute("SELECT * FROM requests ORDER BY id")
            ]
            charges = [
                dict(zip(("key", "invoice", "amount", "charge_id"), row, strict=True))
                for row in self._db.execute("SELECT * FROM charges")
            ]
        return {"requests": requests, "charges": charges}

    def _log(self, kind: str, key: str, status: int, clock: str, body: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT INTO requests (kind, key, status, clock, body) VALUES (?, ?, ?, ?, ?)",
            (kind, key, status, clock, json.dumps(body)),
        )


def handler_for(ledger: Ledger) -> type[BaseHTTPRequestHandler]:
    """HTTP routes over the ledger."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:  # quiet
            return

        def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            key = self.headers.get("Idempotency-Key", "")
            clock = self.headers.get("X-Clock", "")
            if self.path == "/charges":
                status, reply = ledger.charge(key, clock, body)
                extra = {"Retry-After": str(RETRY_AFTER)} if status == 429 else None
                self._reply(status, reply, extra)
            elif self.path == "/llm":
                self._reply(200, ledger.llm(key, clock, body))
            else:
                self._reply(404, {"error": "no such route"})

        def do_GET(self) -> None:
            if self.path.startswith("/charges/"):
                found = ledger.lookup(self.path.removeprefix("/charges/"))
                self._reply(200 if found else 404, found or {})
            elif self.path == "/ledger":
                self._reply(200, ledger.dump())
            else:
                self._reply(404, {"error": "no such route"})

    return Handler


def main() -> None:
    """Serve on 127.0.0.1 (a free port, printed) until killed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(Ledger(sys.argv[1])))
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
