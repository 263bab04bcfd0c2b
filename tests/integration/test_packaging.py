"""Packaging: the wheel installs the three layers under one name; bare names are refused."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = [
    "actae",
    "actae.adapters",
    "actae.adapters.cli",
    "actae.adapters.cli.admin",
    "actae.adapters.cli.console",
    "actae.adapters.cli.drill_worker",
    "actae.adapters.cli.inspecting",
    "actae.adapters.cli.main",
    "actae.adapters.cli.opening",
    "actae.adapters.cli.operating",
    "actae.adapters.cli.printing",
    "actae.adapters.cli.running",
    "actae.adapters.console",
    "actae.adapters.console.api",
    "actae.adapters.console.app",
    "actae.adapters.console.auth",
    "actae.adapters.console.errors",
    "actae.adapters.console.guards",
    "actae.adapters.console.limits",
    "actae.adapters.console.metrics",
    "actae.adapters.console.pages",
    "actae.adapters.console.server",
    "actae.adapters.console.state",
    "actae.adapters.console.stream",
    "actae.adapters.console.wire",
    "actae.adapters.custody",
    "actae.adapters.custody.artifacts",
    "actae.adapters.custody.blobs",
    "actae.adapters.custody.chunks",
    "actae.adapters.custody.datakeys",
    "actae.adapters.custody.files",
    "actae.adapters.custody.holding",
    "actae.adapters.custody.keyring",
    "actae.adapters.custody.reading",
    "actae.adapters.custody.refs",
    "actae.adapters.custody.sealing",
    "actae.adapters.custody.sources",
    "actae.adapters.custody.tables",
    "actae.adapters.drill",
    "actae.adapters.drill.db_faults",
    "actae.adapters.drill.demo",
    "actae.adapters.drill.outages",
    "actae.adapters.drill.provider",
    "actae.adapters.drill.report",
    "actae.adapters.drill.run",
    "actae.adapters.drill.workflows",
    "actae.adapters.langgraph",
    "actae.adapters.langgraph.copying",
    "actae.adapters.langgraph.encoding",
    "actae.adapters.langgraph.forgetting",
    "actae.adapters.langgraph.history",
    "actae.adapters.langgraph.reading",
    "actae.adapters.langgraph.redacting",
    "actae.adapters.langgraph.savers",
    "actae.adapters.langgraph.threads",
    "actae.adapters.langgraph.writing",
    "actae.adapters.logs",
    "actae.adapters.operate",
    "actae.adapters.operate.actions",
    "actae.adapters.operate.prefixes",
    "actae.adapters.operate.versions",
    "actae.adapters.operate.views",
    "actae.adapters.persistence",
    "actae.adapters.persistence.awaiting",
    "actae.adapters.persistence.baseline",
    "actae.adapters.persistence.clock",
    "actae.adapters.persistence.codec",
    "actae.adapters.persistence.encoders",
    "actae.adapters.persistence.eventlog",
    "actae.adapters.persistence.forgets",
    "actae.adapters.persistence.libpq",
    "actae.adapters.persistence.lost_replies",
    "actae.adapters.persistence.migrations",
    "actae.adapters.persistence.operation_ids",
    "actae.adapters.persistence.offloaded",
    "actae.adapters.persistence.outages",
    "actae.adapters.persistence.positions",
    "actae.adapters.persistence.postgres",
    "actae.adapters.persistence.predecessors",
    "actae.adapters.persistence.recorders",
    "actae.adapters.persistence.turns",
    "actae.adapters.persistence.url",
    "actae.adapters.readside",
    "actae.adapters.readside.analyst_sql",
    "actae.adapters.readside.async_subscription",
    "actae.adapters.readside.read_ahead",
    "actae.adapters.readside.grants",
    "actae.adapters.readside.projector",
    "actae.adapters.readside.readmodels",
    "actae.adapters.readside.schema",
    "actae.adapters.readside.standings",
    "actae.adapters.readside.subscription",
    "actae.adapters.redaction",
    "actae.adapters.redaction.patterns",
    "actae.adapters.redaction.redactors",
    "actae.adapters.runtime",
    "actae.adapters.runtime.async_context",
    "actae.adapters.runtime.async_store",
    "actae.adapters.runtime.async_worker",
    "actae.adapters.runtime.backends",
    "actae.adapters.runtime.boundary",
    "actae.adapters.runtime.channel_head",
    "actae.adapters.runtime.deadlines",
    "actae.adapters.runtime.inheritance",
    "actae.adapters.runtime.outcomes",
    "actae.adapters.runtime.retention",
    "actae.adapters.runtime.run_lease",
    "actae.adapters.runtime.run_ledger",
    "actae.adapters.runtime.service",
    "actae.adapters.runtime.store",
    "actae.adapters.runtime.worker",
    "actae.adapters.telemetry",
    "actae.adapters.telemetry.guard",
    "actae.adapters.telemetry.metrics",
    "actae.adapters.telemetry.names",
    "actae.adapters.telemetry.runs",
    "actae.adapters.telemetry.tracing",
    "actae.domain",
    "actae.domain.aggregate",
    "actae.domain.artifacts",
    "actae.domain.channel",
    "actae.domain.custody",
    "actae.domain.disclosure",
    "actae.domain.effects",
    "actae.domain.errors",
    "actae.domain.forking",
    "actae.domain.known_effects",
    "actae.domain.inheritance",
    "actae.domain.keeping",
    "actae.domain.ledger",
    "actae.domain.lifecycle",
    "actae.domain.operation",
    "actae.domain.pipeline",
    "actae.domain.ports",
    "actae.domain.reader",
    "actae.domain.redaction",
    "actae.domain.regression",
    "actae.domain.retention",
    "actae.domain.run",
    "actae.domain.starting",
    "actae.domain.status",
    "actae.domain.type_names",
    "actae.domain.validation",
    "actae.domain.values",
    "actae.domain.waits",
    "actae.langgraph",
    "actae.projections",
    "actae.projections.changes",
    "actae.projections.heads",
    "actae.projections.project",
    "actae.projections.queries",
    "actae.projections.reference",
    "actae.projections.tables",
    "actae.redaction",
]


def test_every_module_is_listed() -> None:
    found = {"actae", "actae.langgraph", "actae.redaction"} | {
        module_of(path)
        for layer in ("domain", "projections", "adapters")
        for path in (ROOT / layer).rglob("*.py")
        if path.name != "__main__.py"  # importing it runs the CLI
    }
    assert found == set(MODULES)


def module_of(path: Path) -> str:
    """``actae.adapters.runtime.store`` for ``adapters/runtime/store.py``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(("actae", *(parts[:-1] if parts[-1] == "__init__" else parts)))


@pytest.mark.slow
def test_built_wheel_imports_every_module_in_a_clean_venv(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        check=True,
    )
    (wheel,) = (tmp_path / "dist").glob("actae-*.whl")
    target = tmp_path / "venv"
    venv.create(target, with_pip=False)
    python = target / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Dependencies come from this environment's site-packages; actae only from the wheel.
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--quiet",
            "--target",
            site,
            str(wheel),
        ],
        check=True,
    )
    probe = (
        "import importlib, actae, pathlib;"
        f"[importlib.import_module(m) for m in {MODULES!r}];"
        f"assert pathlib.Path(actae.__file__).is_relative_to({site!r}), actae.__file__;"
        "import actae.domain.channel as c; assert c.__file__.startswith("
        f"{site!r}), c.__file__;"
        f"assert (pathlib.Path({site!r}) / 'actae' / 'py.typed').exists();"
        f"assert (pathlib.Path({site!r}) / 'actae/adapters/console/static/console.js').exists();"
        "print('ok')"
    )
    result = subprocess.run(
        [python, "-I", "-c", probe], check=False, capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@pytest.mark.parametrize("name", ["domain", "projections", "adapters"])
def test_bare_layer_names_are_refused(name: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", f"import {name}"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode != 0
    assert f"import this package as 'actae.{name}'" in result.stderr
