"""How the command prints: JSON for scripts, rich tables for people.

JSON is the same for every backend, so scripts can pipe it into ``jq``. Tables go to a
terminal at its width; piped, they are as wide as their content (up to 200 columns), so
nothing is cut off mid-id. Ids are shortened to their first eight characters (any unique
prefix names a run, as in git); times are UTC to the second.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson
from pydantic import BaseModel
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from actae.adapters.operate.views import RunView
from actae.domain.values import RunInfo

PIPED_WIDTH = 200
"""Columns a table may take when stdout is not a terminal."""
SHORT = 8
"""Characters of an id a table shows."""
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
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
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
    """A rich console on stdout: colours on a terminal, plain text when piped.

    Markup and emoji codes are off: ``[bold]`` or ``:rocket:`` in a note is run data, text.
    """
    piped = not sys.stdout.isatty()
    return Console(
        width=PIPED_WIDTH if piped else None,
        highlight=False,
        soft_wrap=False,
        markup=False,
        emoji=False,
    )


def short(value: Any) -> str:
    """An id's first characters (an empty cell for none)."""
    return "" if value is None else str(value)[:SHORT]


def moment(value: datetime | None) -> str:
    """A time as UTC to the second (an empty cell for none)."""
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def status(value: str) -> Text:
    """A run status, coloured by how urgent it is."""
    return Text(value, style=STATUS_STYLES.get(value, ""))


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


Column = tuple[str, str, Callable[[Any], RenderableType]]
"""A table column: its heading, the row's key it shows, and how it shows the value."""

RUN_COLUMNS: tuple[Column, ...] = (
    ("RUN", "run_id", short),
    ("WORKFLOW", "workflow_id", text),
    ("AGENT", "agent_id", text),
    ("STATUS", "status", lambda value: status(str(value))),
    ("NEXT ACTION", "next_action", text),
    ("STEPS", "steps_done", amount),
    ("COST", "cost", lambda value: amount(value, 4)),
    ("UPDATED", "updated_at", moment),
)
EFFECT_COLUMNS: tuple[Column, ...] = (
    ("EFFECT", "effect_key", text),
    ("RUN", "run_id", short),
    ("STATUS", "status", text),
    ("IN DOUBT", "in_doubt", lambda value: Text("yes", style="bold red") if value else ""),
    ("TOKEN", "token", lambda value: str(value or 0)),
    ("ATTEMPTS", "attempts", lambda value: str(value or 0)),
    ("HOLDER", "holder", text),
    ("CLAIMED", "claimed_at", moment),
    ("EXPIRES", "expires_at", moment),
    ("LAST ERROR", "last_error", text),
)
AUDIT_COLUMNS: tuple[Column, ...] = (
    ("AT", "at", moment),
    ("ACTION", "action", text),
    ("ACTOR", "actor", text),
    ("ON", "effect_key", lambda value: str(value or "run")),
    ("REASON", "reason", text),
)
CHILD_COLUMNS: tuple[Column, ...] = (
    ("CHILD", "child_run_id", text),
    ("RELATION", "relation", text),
    ("WORKFLOW", "workflow_id", text),
    ("AT CURSOR", "resolved_boundary", text),
    ("REASON", "reason", text),
)


def _table(
    columns: Sequence[Column], rows: Iterable[Mapping[str, Any]], wrap: Collection[str]
) -> Table:
    """Columns that fit stay whole; only those in ``wrap`` (the long ones) wrap."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name, _, _ in columns:
        table.add_column(name, no_wrap=name not in wrap, overflow="fold")
    for row in rows:
        table.add_row(*(show(row.get(key)) for _, key, show in columns))
    return table


def runs_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """One line per run: what it is, where it stands, what should happen next."""
    return _table(RUN_COLUMNS, rows, wrap={"NEXT ACTION"})


def effects_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """One line per effect: its status, claim, fencing token and in-doubt window."""
    return _table(EFFECT_COLUMNS, rows, wrap={"EFFECT", "LAST ERROR"})


def audit_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """One line per operator action: when, what, who, on what, and why."""
    return _table(AUDIT_COLUMNS, rows, wrap={"ACTOR", "ON", "REASON"})


def _decisions(info: RunInfo) -> str:
    """``name: approved by alice ("note")``, one per decision the run has received."""
    return "; ".join(
        f"{name}: {d.kind}"
        + (f" by {d.actor}" if d.actor else "")
        + (f" ({d.note})" if d.note else "")
        for name, d in sorted(info.decisions.items())
    )


def _fields(view: RunView) -> Table:
    info, row = view.info, view.row or {}
    waiting, fork = info.waiting, info.forked_from
    pins = " ".join(f"{k}={v}" for k, v in info.pins.as_dict().items() if v is not None)
    lines: list[tuple[str, RenderableType]] = [
        ("run", str(info.run_id)),
        ("workflow", info.workflow_id),
        ("agent", info.agent_id),
        ("status", status(view.status)),
        ("waiting", "" if waiting is None else f"{waiting.reason} {waiting.name}"),
        ("next action", view.next_action),
        ("decisions", _decisions(info)),
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
        parts += [Text("\nEffects", style="bold underline"), effects_table(view.effects)]
    if view.children:
        children = _table(CHILD_COLUMNS, view.children, wrap=[name for name, _, _ in CHILD_COLUMNS])
        parts += [Text("\nForks and children", style="bold underline"), children]
    return Group(*parts)
