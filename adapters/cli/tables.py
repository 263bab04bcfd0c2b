"""The operator's tables: runs, one run, effects and the audit log, as rich renders them.

Ids are shortened to their first eight characters (any unique prefix names a run in every
command, as in git); times are UTC to the second; columns a table does not need to fit stay
whole and the long ones (next action, errors) wrap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from actae.adapters.operate.views import RunView
from actae.domain.values import Pins, RunInfo

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
    if value is None:
        return ""
    return f"{float(value):,.{digits}f}"


def counts_line(counts: Mapping[str, int]) -> Text:
    """``running 3 · waiting 1 · ...``: how many runs have each status."""
    line = Text()
    for index, (name, count) in enumerate(counts.items()):
        if index:
            line.append(" · ", style="dim")
        line.append(f"{name} {count}", style=STATUS_STYLES.get(name, "") if count else "dim")
    return line


def runs_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """One line per run: what it is, where it stands, what should happen next."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("RUN", "WORKFLOW", "AGENT", "STATUS", "NEXT ACTION", "STEPS", "COST", "UPDATED"):
        table.add_column(name, no_wrap=name != "NEXT ACTION", overflow="fold")
    for row in rows:
        table.add_row(
            short(row["run_id"]),
            str(row["workflow_id"]),
            str(row["agent_id"]),
            status(str(row["status"])),
            str(row["next_action"] or ""),
            amount(row.get("steps_done")),
            amount(row.get("cost"), 4),
            moment(row["updated_at"]),
        )
    return table


def effects_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """One line per effect: its status, claim, fencing token and in-doubt window."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    columns = ("EFFECT", "RUN", "STATUS", "IN DOUBT", "TOKEN", "ATTEMPTS", "HOLDER", "CLAIMED")
    for name in (*columns, "EXPIRES", "LAST ERROR"):
        table.add_column(name, no_wrap=name not in {"EFFECT", "LAST ERROR"}, overflow="fold")
    for row in rows:
        table.add_row(
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
    return table


def audit_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """One line per operator action: when, what, who, on what, and why."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("AT", "ACTION", "ACTOR", "ON", "REASON"):
        table.add_column(name, no_wrap=name in {"AT", "ACTION"}, overflow="fold")
    for row in rows:
        table.add_row(
            moment(row["at"]),
            str(row["action"]),
            str(row["actor"] or ""),
            str(row.get("effect_key") or "run"),
            str(row.get("reason") or ""),
        )
    return table


def _pins(pins: Pins) -> str:
    """The pins a run has (model, prompt, tools, schema), ``none`` if it has none."""
    named = pins.as_dict().items()
    return " ".join(f"{name}={value}" for name, value in named if value is not None) or "none"


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
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    waiting = info.waiting
    pins = info.pins
    lines: list[tuple[str, RenderableType]] = [
        ("run", str(info.run_id)),
        ("workflow", info.workflow_id),
        ("agent", info.agent_id),
        ("status", status(view.status)),
        ("waiting", "" if waiting is None else f"{waiting.reason} {waiting.name}"),
        ("next action", view.next_action),
        ("decisions", _decisions(info)),
        ("error", info.error or ""),
        ("pins", _pins(pins)),
        ("cursor", str(info.cursor)),
        ("state version", str(info.state_version)),
        ("steps done", amount(row.get("steps_done"))),
        ("usage", ", ".join(f"{k}={v:,g}" for k, v in sorted(info.usage.items())) or "none"),
        ("started", moment(info.created_at)),
        ("channel", str(info.channel_id)),
    ]
    if info.parent_run_id is not None:
        lines.append(("parent", str(info.parent_run_id)))
    if info.forked_from is not None:
        fork = info.forked_from
        lines.append(("forked from", f"{fork.parent_run_id} at cursor {fork.resolved_boundary}"))
    for name, value in lines:
        if value != "":
            grid.add_row(name, value)
    return grid


def _children(rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False, title_justify="left")
    for name in ("CHILD", "RELATION", "WORKFLOW", "AT CURSOR", "REASON"):
        table.add_column(name)
    for row in rows:
        table.add_row(
            str(row["child_run_id"]),
            str(row["relation"]),
            str(row["workflow_id"] or ""),
            "" if row["resolved_boundary"] is None else str(row["resolved_boundary"]),
            str(row["reason"] or ""),
        )
    return table


def run_panel(view: RunView) -> Group:
    """One run: its fields, then its effects and its forks and children, if it has any."""
    parts: list[RenderableType] = [_fields(view)]
    if view.effects:
        parts += [Text("\nEffects", style="bold underline"), effects_table(view.effects)]
    if view.children:
        parts += [Text("\nForks and children", style="bold underline"), _children(view.children)]
    return Group(*parts)
