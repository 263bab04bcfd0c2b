"""How the command prints: JSON for scripts, rich tables for people.

JSON is the same for every backend, so scripts can pipe it into ``jq``. Tables go to a
terminal at its width; piped, they are as wide as their content (up to 200 columns), so
nothing is cut off mid-id. Ids are shortened to their first eight characters (any unique
prefix names a run, as in git); times are UTC to the second.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
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


def _table(
    names: Sequence[str], rows: Iterable[Sequence[RenderableType]], wrap: Collection[str]
) -> Table:
    """Columns that fit stay whole; only those in ``wrap`` (the long ones) wrap."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in names:
        table.add_column(name, no_wrap=name not in wrap, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def runs_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """One line per run: what it is, where it stands, what should happen next."""
    names = ("RUN", "WORKFLOW", "AGENT", "STATUS", "NEXT ACTION", "STEPS", "COST", "UPDATED")
    cells = (
        (
            short(row["run_id"]),
            str(row["workflow_id"]),
            str(row["agent_id"]),
            status(str(row["status"])),
            str(row["next_action"] or ""),
            amount(row.get("steps_done")),
            amount(row.get("cost"), 4),
            moment(row["updated_at"]),
        )
        for row in rows
    )
    return _table(names, cells, wrap={"NEXT ACTION"})


def effects_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """One line per effect: its status, claim, fencing token and in-doubt window."""
    names = ("EFFECT", "RUN", "STATUS", "IN DOUBT", "TOKEN", "ATTEMPTS", "HOLDER", "CLAIMED")
    cells = (
        (
            str(row["effect_key"]),
            short(row["run_id"]),
            str(row["status"]),
            Text("yes", style="bold red") if row["in_doubt"] else "",
            str(row["token"] or 0),
            str(row["attempts"] or 0),
            str(row["holder"] or ""),
            moment(row["claimed_at"]),
            moment(row["expires_at"]),
            str(row["last_error"] or ""),
        )
        for row in rows
    )
    return _table((*names, "EXPIRES", "LAST ERROR"), cells, wrap={"EFFECT", "LAST ERROR"})


def audit_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """One line per operator action: when, what, who, on what, and why."""
    cells = (
        (
            moment(row["at"]),
            str(row["action"]),
            str(row["actor"] or ""),
            str(row.get("effect_key") or "run"),
            str(row.get("reason") or ""),
        )
        for row in rows
    )
    return _table(("AT", "ACTION", "ACTOR", "ON", "REASON"), cells, wrap={"ACTOR", "ON", "REASON"})


def _children(rows: Sequence[Mapping[str, Any]]) -> Table:
    names = ("CHILD", "RELATION", "WORKFLOW", "AT CURSOR", "REASON")
    cells = (
        (
            str(row["child_run_id"]),
            str(row["relation"]),
            text(row["workflow_id"]),
            text(row["resolved_boundary"]),
            text(row["reason"]),
        )
        for row in rows
    )
    return _table(names, cells, wrap=names)


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
        parts += [Text("\nForks and children", style="bold underline"), _children(view.children)]
    return Group(*parts)
