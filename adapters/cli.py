"""The ``actae`` command: the demo and read-only inspection of a store.

Inspection commands print JSON, so their output can be piped into ``jq`` or a notebook.
Errors print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from pydantic import BaseModel

import actae
from actae.adapters.demo import demo


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True)
    raise TypeError(type(value).__name__)


def _print_json(value: Any) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    elif isinstance(value, list):
        value = [dataclasses.asdict(item) for item in value]
    sys.stdout.write(orjson.dumps(value, default=_default, option=orjson.OPT_INDENT_2).decode())
    sys.stdout.write("\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="actae", description="Durable execution for LLM-agent runs."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo_cmd = commands.add_parser(
        "demo", help="run a short workflow, kill its worker with SIGKILL, recover, fork"
    )
    demo_cmd.add_argument("--db", help="store URL (default: SQLite in a temporary folder)")
    for name, target, text in [
        ("head", "channel_id", "receipt of a channel's last event"),
        ("state", "channel_id", "state version in force at a cursor (default: head)"),
        ("events", "channel_id", "events of a channel"),
        ("recover", "channel_id", "state at the head plus the recorded events after it"),
        ("run", "run_id", "a run with its status and head"),
        ("lineage", "run_id", "fork receipts up and down from a run"),
    ]:
        command = commands.add_parser(name, help=text)
        command.add_argument("--db", required=True, help="store URL, e.g. sqlite:///runs.db")
        command.add_argument(target)
        if name == "state":
            command.add_argument("--cursor", type=int)
        if name == "events":
            command.add_argument("--after", type=int, default=0)
            command.add_argument("--limit", type=int)
    return parser


def _inspect(args: argparse.Namespace) -> Any:
    queries: dict[str, Callable[[actae.Store], Any]] = {
        "head": lambda s: s.head(args.channel_id),
        "state": lambda s: s.state_at(args.channel_id, cursor=args.cursor),
        "events": lambda s: s.events(args.channel_id, after=args.after, limit=args.limit),
        "recover": lambda s: s.recover(args.channel_id),
        "run": lambda s: s.run(args.run_id),
        "lineage": lambda s: s.lineage(args.run_id),
    }
    with actae.open(args.db) as store:
        return queries[args.command](store)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "demo":
            return demo(args.db)
        _print_json(_inspect(args))
    except actae.ActaeError as error:
        print(f"actae: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
