"""How the command prints: JSON for scripts (the same on every backend), rich tables for people.

Piped, a table is as wide as its content (up to 200 columns), so nothing is cut mid-id.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

import orjson
from pydantic import BaseModel
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from actae.adapters.operate.views import RunView

PIPED_WIDTH = 200
SHORT = 8  # characters of an id a table shows: a unique prefix names a run, as in git
STATUS_STYLES = {
    "running": "green",
    "waiting": "cyan",
    "retrying": "yellow",
    "blocked": "bold red",
    "paused": "magenta",
    "failed": "red",
    "cancelled": "dim",
    "completed": "dim green",
}


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True)
    raise TypeError(type(value).__name__)


def print_json(value: Any) -> None:
    """``value`` (dataclasses, models, lists and dicts of them) as indented JSON on stdout."""
    sys.stdout.write(orjson.dumps(value, default=_default, option=orjson.OPT_INDENT_2).decode())
    sys.stdout.write("\n")


def report(shown: RenderableType, value: Any, as_json: bool) -> int:
    """``value`` as JSON for scripts, or what is ``shown`` to people; the exit status, 0."""
    if as_json:
        print_json(value)
    else:
        console().print(shown)
    return 0


def console() -> Console:
    """A rich console on stdout, markup and emoji off: ``[bold]`` in a note is run data."""
    piped = not sys.stdout.isatty()
    return Console(
        width=PIPED_WIDTH if piped else None,
        highlight=False,
        soft_wrap=False,
        markup=False,
        emoji=False,
    )


def short(value: Any) -> str:
    """An id's first characters."""
    return "" if value is None else str(value)[:SHORT]


def moment(value: datetime | None) -> str:
    """A time as UTC to the second."""
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def status(value: Any) -> Text:
    """A run status, coloured by how urgent it is."""
    return Text(str(value), style=STATUS_STYLES.get(str(value), ""))


def amount(value: Any, digits: int = 0) -> str:
    """A number of tokens or a cost, empty when there is none yet."""
    return "" if value is None else f"{float(value):,.{digits}f}"


def text(value: Any) -> str:
    """A cell's text, empty for none."""
    return "" if value is None else str(value)


def counts_line(counts: Mapping[str, int]) -> Text:
    """``running 3 · waiting 1 · ...``: how many runs have each status."""
    line = Text()
    for index, (name, count) in enumerate(counts.items()):
        if index:
            line.append(" · ", style="dim")
        line.append(f"{name} {count}", style=STATUS_STYLES.get(name, "") if count else "dim")
    return line


class Column(NamedTuple):
    """A table column: its heading, the row's key it shows, how, and whether it wraps."""

    heading: str
    key: str
    show: Callable[[Any], RenderableType] = text
    wrap: bool = False


RUN_COLUMNS = (
    Column("RUN", "run_id", short),
    Column("WORKFLOW", "workflow_id"),
    Column("AGENT", "agent_id"),
    Column("STATUS", "status", status),
    Column("NEXT ACTION", "next_action", wrap=True),
    Column("STEPS", "steps_done", amount),
    Column("COST", "cost", lambda value: amount(value, 4)),
    Column("UPDATED", "updated_at", moment),
)
EFFECT_COLUMNS = (
    Column("EFFECT", "effect_key", wrap=True),
    Column("RUN", "run_id", short),
    Column("STATUS", "status"),
    Column("IN DOUBT", "in_doubt", lambda value: Text("yes", style="bold red") if value else ""),
    Column("TOKEN", "token", lambda value: str(value or 0)),
    Column("ATTEMPTS", "attempts", lambda value: str(value or 0)),
    Column("HOLDER", "holder"),
    Column("CLAIMED", "claimed_at", moment),
    Column("EXPIRES", "expires_at", moment),
    Column("LAST ERROR", "last_error", wrap=True),
)
AUDIT_COLUMNS = (
    Column("AT", "at", moment),
    Column("ACTION", "action"),
    Column("ACTOR", "actor", wrap=True),
    Column("ON", "effect_key", lambda value: str(value or "run"), wrap=True),
    Column("REASON", "reason", wrap=True),
)
CHILD_COLUMNS = (
    Column("CHILD", "child_run_id", wrap=True),
    Column("RELATION", "relation", wrap=True),
    Column("WORKFLOW", "workflow_id", wrap=True),
    Column("AT CURSOR", "resolved_boundary", wrap=True),
    Column("REASON", "reason", wrap=True),
)


def table(columns: Iterable[Column], rows: Iterable[Mapping[str, Any]]) -> Table:
    """One line per row; only the long columns wrap."""
    grid = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        grid.add_column(column.heading, no_wrap=not column.wrap, overflow="fold")
    for row in rows:
        grid.add_row(*(column.show(row.get(column.key)) for column in columns))
    return grid


def _fields(view: RunView) -> Table:
    info, row = view.info, view.row or {}
    waiting, fork = info.waiting, info.forked_from
    pins = " ".join(f"{k}={v}" for k, v in info.pins.as_dict().items() if v is not None)
    decisions = "; ".join(  # name: approved by alice (note)
        f"{name}: {d.kind}"
        + (f" by {d.actor}" if d.actor else "")
        + (f" ({d.note})" if d.note else "")
        for name, d in sorted(info.decisions.items())
    )
    lines: list[tuple[str, RenderableType]] = [
        ("run", str(info.run_id)),
        ("workflow", info.workflow_id),
        ("agent", info.agent_id),
        ("status", status(view.status)),
        ("waiting", "" if waiting is None else f"{waiting.reason} {waiting.name}"),
        ("next action", view.next_action),
        ("decisions", decisions),
        ("error", info.error or ""),
        ("pins", pins or "none"),
        ("cursor", str(info.cursor)),
        ("state version", str(info.state_version)),
        ("steps done", amount(row.get("steps_done"))),
        ("usage", ", ".join(f"{k}={v:,g}" for k, v in sorted(info.usage.items())) or "none"),
        ("started", moment(info.created_at)),
        ("channel", str(info.channel_id)),
        ("parent", text(info.parent_run_id)),
        (
            "forked from",
            "" if fork is None else f"{fork.parent_run_id} at cursor {fork.resolved_boundary}",
        ),
    ]
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for name, value in lines:
        if value != "":
            grid.add_row(name, value)
    return grid


def run_panel(view: RunView) -> Group:
    """One run: its fields, then its effects and its forks and children, if it has any."""
    parts: list[RenderableType] = [_fields(view)]
    if view.effects:
        parts += [Text("\nEffects", style="bold underline"), table(EFFECT_COLUMNS, view.effects)]
    if view.children:
        parts += [Text("\nForks and children", style="bold underline")]
        parts += [table(CHILD_COLUMNS, view.children)]
    return Group(*parts)
