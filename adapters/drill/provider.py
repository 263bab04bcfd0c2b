"""The drill's outside world: a mock payment provider and a mock LLM, in their own process.

Its own ledger (SQLite) records every request and every execution, so the report sees a key
executed twice, which key-level deduplication would hide. Charges are idempotent by
``Idempotency-Key`` and throttled (429) twice per key; model answers are random, so a re-run
is visible. ``--ignore-idempotency-keys`` executes every request, to prove the report sees it.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

THROTTLED_ATTEMPTS = 2
RETRY_AFTER = 30
LLM_COST = 0.8  # dollars per call, as in the seed's "$0.80 research call"
CHARGE_FIELDS = ("key", "invoice", "amount", "charge_id")


class ChargeBook:
    """The provider's own records: every request with its outcome, every charge executed."""

    def __init__(self, path: str, *, honour_keys: bool = True) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._honour_keys = honour_keys
        self._db.executescript(
            "CREATE TABLE IF NOT EXISTS requests (id INTEGER PRIMARY KEY, kind TEXT, key TEXT, "
            "status INTEGER, outcome TEXT, clock TEXT, body TEXT);"
            "CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY, key TEXT, "
            "invoice TEXT, amount INTEGER, charge_id TEXT, clock TEXT);"
            "CREATE INDEX IF NOT EXISTS charges_by_key ON charges (key, id);"
        )

    def charge(self, key: str, clock: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Throttle the first attempts of a key; then execute once, and replay after that."""
        with self._lock, self._db:  # a request's log line and its charge commit together
            self._db.execute("BEGIN IMMEDIATE")
            (attempts,) = self._db.execute(
                "SELECT count(*) FROM requests WHERE kind = 'charge' AND key = ?", (key,)
            ).fetchone()
            if attempts < THROTTLED_ATTEMPTS:
                self._log("charge", key, 429, "throttled", clock, body)
                return 429, {"error": "rate limited"}
            made = self.lookup(key)
            if made is not None and self._honour_keys:
                self._log("charge", key, 200, "replayed", clock, body)
                return 200, made
            charge = {
                "key": key,
                "invoice": body.get("invoice"),
                "amount": body.get("amount"),
                "charge_id": f"ch_{uuid.uuid4().hex[:12]}",  # a new charge, a new id
            }
            self._db.execute(
                "INSERT INTO charges (key, invoice, amount, charge_id, clock) "
                "VALUES (?, ?, ?, ?, ?)",
                (*charge.values(), clock),
            )
            self._log("charge", key, 200, "executed", clock, body)
            return 200, charge

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The (first) charge made under ``key``: what a replay or a reconciliation sees."""
        row = self._db.execute(
            "SELECT key, invoice, amount, charge_id FROM charges WHERE key = ? ORDER BY id LIMIT 1",
            (key,),
        ).fetchone()
        return None if row is None else dict(zip(CHARGE_FIELDS, row, strict=True))

    def llm(self, key: str, clock: str, body: dict[str, Any]) -> dict[str, Any]:
        """A sampled answer; every call is logged, re-runs included."""
        sample = random.randint(1, 10**6)  # noqa: S311 - a stand-in model, not crypto
        tokens = random.randint(400, 1200)  # noqa: S311
        with self._lock:
            self._log("llm", key, 200, "answered", clock, body)
        return {
            "text": f"{body.get('prompt', '')}: option {sample}",
            "tokens": tokens,
            "cost": LLM_COST,
        }

    def dump(self) -> dict[str, Any]:
        """Everything the provider saw (requests) and did (charges, one row per execution)."""
        with self._lock:
            return {"requests": self._rows("requests"), "charges": self._rows("charges")}

    def _rows(self, table: str) -> list[dict[str, Any]]:
        rows = self._db.execute(f"SELECT * FROM {table} ORDER BY id")  # noqa: S608 - our names
        names = [column[0] for column in rows.description]
        return [dict(zip(names, row, strict=True)) for row in rows]

    def _log(
        self, kind: str, key: str, status: int, outcome: str, clock: str, body: dict[str, Any]
    ) -> None:
        self._db.execute(
            "INSERT INTO requests (kind, key, status, outcome, clock, body) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (kind, key, status, outcome, clock, json.dumps(body)),
        )


def handler_for(book: ChargeBook) -> type[BaseHTTPRequestHandler]:
    """HTTP routes over the provider's charge book."""

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
                status, reply = book.charge(key, clock, body)
                extra = {"Retry-After": str(RETRY_AFTER)} if status == 429 else None
                self._reply(status, reply, extra)
            elif self.path == "/llm":
                self._reply(200, book.llm(key, clock, body))
            else:
                self._reply(404, {"error": "no such route"})

        def do_GET(self) -> None:
            if self.path.startswith("/charges/"):
                found = book.lookup(self.path.removeprefix("/charges/"))
                self._reply(200 if found else 404, found or {})
            elif self.path == "/ledger":
                self._reply(200, book.dump())
            else:
                self._reply(404, {"error": "no such route"})

    return Handler


def main() -> None:
    """Serve on 127.0.0.1 (a free port, printed) until killed."""
    parser = argparse.ArgumentParser(prog="python -m actae.adapters.drill.provider")
    parser.add_argument("ledger", help="the provider's SQLite ledger file")
    parser.add_argument("--ignore-idempotency-keys", action="store_true")
    args = parser.parse_args()
    book = ChargeBook(args.ledger, honour_keys=not args.ignore_idempotency_keys)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(book))
    print(f"port {server.server_address[1]}", flush=True)  # to the drill: output, not a log
    server.serve_forever()


if __name__ == "__main__":
    main()
