"""The house measures: how big the shipped library is, how its modules depend, how deep a write is.

None of these is a speed, so none drifts with the machine's load:

- **shipped lines**: every line of every ``*.py`` file under ``actae/``, ``domain/``,
  ``projections/`` and ``adapters/`` (what ``wc -l`` counts: blank lines and docstrings too);
- **import circles**: the strongly connected groups of two or more modules in the import
  graph of the installed ``actae`` package (grimp, which import-linter uses, on the staged
  tree of ``make layers``), imports under ``if TYPE_CHECKING:`` included: such an import
  never runs, but the modules still cannot be read, moved or tested one without the other;
- **upward arrows**: imports against the documented direction, over the same graph: a
  layer importing an outer one (``domain`` → ``projections``/``adapters``, ``projections`` →
  ``adapters``), any of them importing the public face (``actae``, ``actae.langgraph``,
  ``actae.redaction``), or a room of adapters importing a room that depends on it in the
  order of docs/architecture.md (``ROOMS``); ``adapters/logs.py`` serves every room and
  imports none;
- **files from Store.transition to its SQL**: one transition on a PostgreSQL store, traced
  with ``sys.setprofile``: every library file (under the four folders) in which a Python
  function is entered from ``Store.transition``'s call until psycopg executes the statement
  that inserts the event. The files on the call stack at that moment are reported beside;
  they are a subset. A first transition on the same run warms caches and imports, so the
  traced one is a steady-state transition;
- **duplicate pairs**: the rows of the ``duplicates`` tool (a copy of the four folders, the
  200 most shared pairs at most) that it does not call boilerplate. The tool exists on the
  project's VM only; elsewhere the figure is "not measured".

Run with ``make bench`` (it makes the staged tree first) or ``python -m benchmarks.house
[--dsn DSN]``; results go to ``benchmarks/results/house.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import actae
from benchmarks.common import DSN, STATE, progress, save, scratch_schema, stamp, with_schema
from benchmarks.core import transition_step

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("actae", "domain", "projections", "adapters")
STAGE = ROOT / "build" / "stage"
"""The installed layout (``actae/domain``, …) as symlinks: the Makefile's ``$(STAGE)``."""

LAYERS = ("actae.domain", "actae.projections", "actae.adapters")
"""Innermost first: a layer may import the ones before it only."""
FACE = ("actae", "actae.langgraph", "actae.redaction")
"""The public face: nothing inside the layers imports it."""
ROOMS: dict[str, set[str]] = {
    "custody": {"persistence"},
    "readside": {"custody"},
    "runtime": {"readside", "telemetry", "redaction"},
    "operate": {"runtime"},
    "cli": {"operate"},
    "console": {"operate"},
    "drill": {"runtime"},
    "langgraph": {"runtime"},
}
"""Which rooms each room depends on directly (docs/architecture.md: persistence ← custody ←
readside ← runtime ← operate ← cli, console; telemetry, redaction ← runtime; runtime ← drill,
langgraph). Rooms the order does not relate may import each other."""
SHARED_ROOM = "logs"
"""``adapters/logs.py``: below every room."""

DUPLICATES_MOST, DUPLICATES_SECONDS = 200, 120
UNSEEN = "not measured (no INSERT of events in the calling thread)"


# -- shipped lines ------------------------------------------------------------------------


def shipped_lines() -> dict[str, int]:
    """Lines of ``*.py`` per shipped folder."""
    return {
        folder: sum(
            len(path.read_bytes().splitlines()) for path in sorted((ROOT / folder).rglob("*.py"))
        )
        for folder in SHIPPED
    }


# -- the import graph ---------------------------------------------------------------------

GRAPH_SCRIPT = """
import json, grimp
graph = grimp.build_graph("actae", exclude_type_checking_imports=False, cache_dir=None)
print(json.dumps({m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}))
"""


def import_graph() -> dict[str, list[str]]:
    """Each module of the installed ``actae`` and the ``actae`` modules it imports.

    grimp finds the package through Python's import system; run from the staged tree, it
    finds the installed layout (the editable install's hook would show ``actae/`` alone).
    """
    if not (STAGE / "actae" / "domain").exists():
        raise SystemExit(f"{STAGE} is missing: `make layers` (or `make bench`) stages it")
    out = subprocess.run(
        [sys.executable, "-c", GRAPH_SCRIPT],
        cwd=STAGE,
        env={**os.environ, "PYTHONPATH": str(STAGE)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    graph: dict[str, list[str]] = json.loads(out)
    return graph


def circles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph.get(target, []))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return sorted(found)


def layer(module: str) -> int | None:
    """The layer's rank (0 innermost), or None for the face."""
    for rank, name in enumerate(LAYERS):
        if module == name or module.startswith(name + "."):
            return rank
    return None


def room(module: str) -> str | None:
    """The room of adapters a module is in (``actae.adapters.<room>…``), if any."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "adapters" else None


def depends_on(upper: str, lower: str) -> bool:
    """Whether room ``upper`` depends on room ``lower``, directly or not, by ``ROOMS``."""
    seen: set[str] = set()
    todo = [upper]
    while todo:
        for below in ROOMS.get(todo.pop(), set()) - seen:
            if below == lower:
                return True
            seen.add(below)
            todo.append(below)
    return False


def upward(importer: str, imported: str) -> bool:
    """Whether ``importer → imported`` goes against the documented direction."""
    mine, theirs = layer(importer), layer(imported)
    if mine is None:
        return False  # the face may import every layer
    if theirs is None or theirs > mine:
        return True
    here, there = room(importer), room(imported)
    if here is None or there is None or here == there:
        return False
    return here == SHARED_ROOM or depends_on(there, here)


def arrows(graph: dict[str, list[str]]) -> list[str]:
    """Every upward import, as ``importer -> imported``."""
    return sorted(
        f"{importer} -> {imported}"
        for importer, imports in graph.items()
        for imported in imports
        if imported in graph and upward(importer, imported)
    )


# -- files from Store.transition to its SQL -------------------------------------------------

LIBRARY = tuple(str(ROOT / folder) + "/" for folder in SHIPPED)


def library_file(filename: str) -> str | None:
    """``filename`` relative to the repository if it is a shipped library file."""
    return str(Path(filename).relative_to(ROOT)) if filename.startswith(LIBRARY) else None


def inserts_events(frame: FrameType) -> bool:
    """Whether ``frame`` is psycopg executing a statement that inserts events."""
    code = frame.f_code
    if code.co_name not in {"execute", "executemany"} or "psycopg" not in code.co_filename:
        return False
    query = frame.f_locals.get("query")
    text = query if isinstance(query, str | bytes) else repr(query)
    return names_an_insert_of_events(text)


def hands_over_an_insert(returned: object) -> bool:
    """Whether a library function returns the text of an insert of events to its caller.

    A statement sent through psycopg's libpq layer (``psycopg.pq``, compiled) raises no
    profile event; the function that makes its text for the caller that sends it does.
    """
    values = returned if isinstance(returned, tuple) else (returned,)
    return any(isinstance(v, str | bytes) and names_an_insert_of_events(v) for v in values)


def names_an_insert_of_events(text: str | bytes) -> bool:
    """Whether a statement's ``text`` inserts into the events table."""
    lowered = (text.decode(errors="replace") if isinstance(text, bytes) else text).lower()
    return "insert" in lowered and "events" in lowered


def transition_files(dsn: str) -> dict[str, list[str]]:
    """The library files one steady-state transition passes through before its INSERT.

    Empty when no INSERT of events was seen: ``sys.setprofile`` follows the calling thread
    only, so a transition whose SQL ran in another thread is not measured (and says so).
    """
    with (
        scratch_schema(dsn, "bench_house") as schema,
        actae.open(with_schema(dsn, schema)) as store,
    ):
        run = store.start_run(f"house-{uuid.uuid4()}", agent_id="bench", state=STATE)

        head = transition_step(store, run, store.head(run.channel_id), 1)  # warms caches
        entered: list[str] = []
        on_stack: list[str] = []

        def profile(frame: FrameType, event: str, arg: object) -> None:
            if on_stack:
                return
            sent_from = None
            if event == "call" and inserts_events(frame):
                sent_from = frame
            elif event == "return" and library_file(frame.f_code.co_filename):
                sent_from = frame.f_back if hands_over_an_insert(arg) else None
            if sent_from is not None:
                walk: FrameType | None = sent_from
                while walk is not None:
                    name = library_file(walk.f_code.co_filename)
                    if name is not None and name not in on_stack:
                        on_stack.append(name)
                    walk = walk.f_back
                on_stack.reverse()
                return
            name = library_file(frame.f_code.co_filename) if event == "call" else None
            if name is not None and name not in entered:
                entered.append(name)

        with traced(profile):
            transition_step(store, run, head, 2)
    if not on_stack:  # the profile sees this thread only: the INSERT ran in another one
        return {}
    return {"entered": entered, "on_stack": on_stack}


@contextmanager
def traced(profile: Any) -> Iterator[None]:
    """``sys.setprofile(profile)`` for the ``with`` block, this thread only."""
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)


# -- duplicates -----------------------------------------------------------------------------


def duplicate_pairs() -> dict[str, Any] | None:
    """The ``duplicates`` tool's non-boilerplate rows over a copy of the four folders."""
    tool, git = shutil.which("duplicates"), shutil.which("git")
    if tool is None or git is None:
        return None
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder)
        for name in SHIPPED:
            shutil.copytree(
                ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        subprocess.run([git, "init", "--quiet", str(copy)], check=True)
        out = subprocess.run(
            [
                tool,
                "--repo",
                str(copy),
                "--most",
                str(DUPLICATES_MOST),
                "--seconds",
                str(DUPLICATES_SECONDS),
            ],
            cwd=copy,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    rows = [line for line in out.splitlines() if line[:1] == "D" and line[1:2].isdigit()]
    kept = [row for row in rows if "boilerplate" not in row]
    notes = [line for line in out.splitlines() if line.startswith(("(+", "incomplete:"))]
    return {"pairs": len(kept), "boilerplate": len(rows) - len(kept), "rows": kept, "notes": notes}


# -- report ---------------------------------------------------------------------------------


def measure(dsn: str) -> dict[str, Any]:
    progress("house: shipped lines")
    results: dict[str, Any] = {"lines": shipped_lines()}
    progress("house: the import graph (grimp, on the staged tree)")
    graph = import_graph()
    results |= {"modules": len(graph), "circles": circles(graph), "upward": arrows(graph)}
    progress("house: files from Store.transition to its INSERT")
    results["transition_files"] = transition_files(dsn)
    progress(f"house: duplicate pairs (up to {DUPLICATES_SECONDS} s)")
    results["duplicates"] = duplicate_pairs()
    return results


def table(results: dict[str, Any]) -> str:
    files = results["transition_files"]
    dups = results["duplicates"]
    lines = [
        "| house measure | figure |",
        "|---|---|",
        "| shipped lines | "
        + ", ".join(f"{folder}/ {n:,}" for folder, n in results["lines"].items())
        + f"; {sum(results['lines'].values()):,} in all |",
        f"| import circles ({results['modules']} modules) | {len(results['circles'])}"
        + "".join(f"; {' ↔ '.join(group)}" for group in results["circles"])
        + " |",
        f"| upward arrows | {len(results['upward'])}"
        + "".join(f"; {arrow}" for arrow in results["upward"])
        + " |",
        *(
            [
                f"| files entered from Store.transition to its INSERT | {len(files['entered'])}: "
                + ", ".join(files["entered"])
                + " |",
                f"| files on the stack at the INSERT | {len(files['on_stack'])}: "
                + ", ".join(files["on_stack"])
                + " |",
            ]
            if files
            else [f"| files from Store.transition to its INSERT | {UNSEEN} |"]
        ),
        "| non-boilerplate duplicate pairs | "
        + (
            "not measured (needs the duplicates tool)"
            if dups is None
            else f"{dups['pairs']} ({dups['boilerplate']} boilerplate rows beside)"
        )
        + " |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    args = parser.parse_args()
    results: dict[str, Any] = {**stamp(), **measure(args.dsn)}
    save("house", results)
    print(f"\nActae house measures, {results['date']}\n")
    print(table(results))


if __name__ == "__main__":
    main()
