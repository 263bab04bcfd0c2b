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
    "actae.domain",
    "actae.domain.aggregate",
    "actae.domain.channel",
    "actae.domain.effects",
    "actae.domain.ledger",
    "actae.domain.lifecycle",
    "actae.domain.errors",
    "actae.domain.forking",
    "actae.domain.heads",
    "actae.domain.inheritance",
    "actae.domain.operation",
    "actae.domain.ports",
    "actae.domain.reader",
    "actae.domain.run",
    "actae.domain.starting",
    "actae.domain.commands",
    "actae.domain.appending",
    "actae.domain.pipeline",
    "actae.domain.plan",
    "actae.domain.validation",
    "actae.domain.values",
    "actae.domain.waits",
    "actae.projections",
    "actae.projections.changes",
    "actae.projections.project",
    "actae.projections.queries",
    "actae.projections.tables",
    "actae.adapters",
    "actae.adapters.cli",
    "actae.adapters.cli_store",
    "actae.adapters.clock",
    "actae.adapters.codec",
    "actae.adapters.context",
    "actae.adapters.context_effects",
    "actae.adapters.context_replay",
    "actae.adapters.context_retries",
    "actae.adapters.db_faults",
    "actae.adapters.demo",
    "actae.adapters.eventlog",
    "actae.adapters.drill",
    "actae.adapters.drill_outages",
    "actae.adapters.drill_processes",
    "actae.adapters.drill_provider",
    "actae.adapters.drill_report",
    "actae.adapters.drill_time",
    "actae.adapters.drill_workflows",
    "actae.adapters.libpq",
    "actae.adapters.logs",
    "actae.adapters.migrations",
    "actae.adapters.service",
    "actae.adapters.outages",
    "actae.adapters.outcomes",
    "actae.adapters.postgres",
    "actae.adapters.lost_replies",
    "actae.adapters.projector",
    "actae.adapters.readmodel_schema",
    "actae.adapters.readmodels",
    "actae.adapters.run_lease",
    "actae.adapters.store",
    "actae.adapters.store_ledger",
    "actae.adapters.store_lifecycle",
    "actae.adapters.store_resume",
    "actae.adapters.subscription",
    "actae.adapters.url",
    "actae.adapters.worker_tables",
    "actae.adapters.worker",
]


def test_every_module_is_listed() -> None:
    found = {"actae"} | {
        f"actae.{path.parent.name}"
        if path.name == "__init__.py"
        else f"actae.{path.parent.name}.{path.stem}"
        for layer in ("domain", "projections", "adapters")
        for path in (ROOT / layer).glob("*.py")
    }
    assert found == set(MODULES)


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
