"""The ``actae`` command fails in one line, creates no store by reading, and finds its inputs.

Every failure a user can cause from the command line (a server that does not answer, a
mistyped URL, a store that does not exist) prints one line to stderr and exits with status
2, as docs/cli.md promises; a traceback there is a bug.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sqlite3
import subprocess
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

import actae
from actae.adapters.cli.main import _version
from actae.adapters.persistence.url import parse_store_url
from tests.helpers import ACTAE, actae_cli

SOME_ID = "00000000-0000-0000-0000-000000000001"
READ_ONLY = [
    ["head", SOME_ID],
    ["state", SOME_ID],
    ["events", SOME_ID],
    ["recover", SOME_ID],
    ["run", SOME_ID],
    ["lineage", SOME_ID],
]
OPENS_A_STORE = [
    *READ_ONLY,
    ["project", "--once"],
    ["worker", "--import", "json", "--once"],
    ["demo"],
    ["drill"],
]
REFUSED = "postgresql://postgres:s3cret@127.0.0.1:1/x"  # nothing listens on port 1


def actae_process(
    *args: str, environ: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real ``actae`` command; ``environ``: added to this environment, less ``ACTAE_DB``."""
    env = None
    if environ is not None:
        env = {key: value for key, value in os.environ.items() if key != "ACTAE_DB"} | environ
    return subprocess.run(
        [*ACTAE, *args], capture_output=True, text=True, check=False, timeout=120, env=env
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The error line, after checking that it is the only thing on stderr and status is 2."""
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("actae: error: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr.removeprefix("actae: error: ").rstrip("\n")


@pytest.mark.parametrize("verb", OPENS_A_STORE, ids=lambda verb: verb[0])
def test_a_server_that_refuses_connections_is_one_line_and_status_2(verb: list[str]) -> None:
    result = actae_cli(verb[0], "--db", REFUSED, *verb[1:])

    line = assert_one_line_error(result)
    assert "cannot open or reach the store at postgresql://postgres:***@127.0.0.1:1/x" in line
    assert "Connection refused" in line
    assert "s3cret" not in result.stderr


def test_the_command_itself_fails_in_one_line_and_status_2() -> None:
    """The same as above through a real ``actae`` process: nothing else reaches stderr."""
    line = assert_one_line_error(actae_process("run", "--db", REFUSED, SOME_ID))
    assert "cannot open or reach the store" in line


def test_a_host_that_does_not_resolve_is_one_line_and_status_2() -> None:
    result = actae_cli("run", "--db", "postgresql://postgres@no-such-host.invalid/x", SOME_ID)

    line = assert_one_line_error(result)
    assert "cannot open or reach the store at postgresql://postgres@no-such-host.invalid/x" in line


CREATES_A_STORE = [["worker", "--import", "json", "--once"], ["demo"], ["drill"]]


@pytest.mark.parametrize("verb", CREATES_A_STORE, ids=lambda verb: verb[0])
def test_a_sqlite_folder_that_does_not_exist_is_one_line_and_status_2(
    verb: list[str], tmp_path: Path
) -> None:
    folder = tmp_path / "no-such-folder"
    url = f"sqlite:///{folder / 'runs.db'}"

    result = actae_cli(verb[0], "--db", url, *verb[1:])

    line = assert_one_line_error(result)
    assert line == f"invalid url: the folder {folder} does not exist; create it first"
    assert not folder.exists()


def test_a_port_that_is_not_a_number_is_one_line_and_status_2() -> None:
    result = actae_cli("run", "--db", "postgresql://postgres@127.0.0.1:54x2/db", SOME_ID)

    assert "invalid url" in assert_one_line_error(result)


@pytest.mark.parametrize("verb", READ_ONLY, ids=lambda verb: verb[0])
def test_reading_a_missing_sqlite_store_creates_no_file(verb: list[str], tmp_path: Path) -> None:
    path = tmp_path / "mistyped.db"
    url = f"sqlite:///{path}"

    result = actae_cli(verb[0], "--db", url, *verb[1:])

    assert assert_one_line_error(result).startswith(f"no Actae store at {url};")
    assert not path.exists()


def test_reading_a_sqlite_file_that_holds_no_store_adds_no_tables(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    sqlite3.connect(path).close()  # an empty database: a file, but not an Actae store

    result = actae_cli("run", "--db", f"sqlite:///{path}", SOME_ID)

    assert assert_one_line_error(result).startswith("no Actae store at ")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []


def schema_of(url: str) -> str:
    return parse_store_url(url).postgres_schema


def with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    host = f"{parts.hostname}:{parts.port or 5432}"
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{password}@{host}"))


@pytest.mark.postgres
@pytest.mark.parametrize("verb", READ_ONLY, ids=lambda verb: verb[0])
def test_reading_a_missing_postgres_schema_creates_no_schema(
    verb: list[str], pg_url: str, pg_dsn: str
) -> None:
    # The test server trusts local connections, so any password gets in: it must not show.
    url = with_password(pg_url, "s3cret")

    result = actae_cli(verb[0], "--db", url, *verb[1:])

    line = assert_one_line_error(result)
    assert line.startswith(f"no Actae store at {url.replace(':s3cret@', ':***@')};")
    with psycopg.connect(pg_dsn) as conn:
        found = conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s",
            (schema_of(pg_url),),
        ).fetchone()
    assert found == (0,)


@pytest.mark.postgres
def test_reading_a_postgres_schema_that_holds_no_store_adds_no_tables(
    pg_url: str, pg_dsn: str
) -> None:
    schema = schema_of(pg_url)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')

    result = actae_cli("events", "--db", pg_url, SOME_ID)

    assert assert_one_line_error(result).startswith("no Actae store at ")
    with psycopg.connect(pg_dsn) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchall()
    assert tables == []


def test_version_is_the_installed_distribution_version() -> None:
    result = actae_cli("--version")

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"actae {importlib.metadata.version('actae')}"


def test_version_from_a_source_tree_without_the_distribution_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)

    assert _version() == "unknown (the actae distribution is not installed)"


def test_db_file_holds_the_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with actae.open(url) as store:
        run = store.start_run("wf", agent_id="a", state={"n": 1})
    db_file = tmp_path / "store-url"
    db_file.write_text(url + "\n")

    result = actae_cli("run", "--db-file", str(db_file), str(run.run_id))

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["run_id"] == str(run.run_id)


def test_a_missing_db_file_is_one_line_and_status_2(tmp_path: Path) -> None:
    result = actae_cli("run", "--db-file", str(tmp_path / "absent"), SOME_ID)

    assert "--db-file" in assert_one_line_error(result)


def test_import_of_a_file_can_import_its_siblings(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    (folder / "greeting_sibling.py").write_text('GREETING = "hello from a sibling module"\n')
    (folder / "wf.py").write_text(
        "import actae\n"
        "from greeting_sibling import GREETING\n\n\n"
        '@actae.workflow("greeter")\n'
        "def greeter(ctx):\n"
        '    return {"greeting": GREETING}\n'
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with actae.open(url) as store:
        run = store.start_run("greet", agent_id="greeter", state={})

    # Run from elsewhere: neither the working directory nor PYTHONPATH holds the file's folder.
    result = actae_cli(
        "worker", "--db", url, "--import", str(folder / "wf.py"), "--once", cwd=tmp_path
    )

    assert result.returncode == 0, result.stderr
    with actae.open(url) as store:
        done = store.run(run.run_id)
    assert done.status is actae.RunStatus.COMPLETED
    assert done.result == {"greeting": "hello from a sibling module"}


def test_import_of_a_missing_file_is_one_line_and_status_2(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    result = actae_cli("worker", "--db", url, "--import", str(tmp_path / "absent.py"), "--once")

    assert "no such file" in assert_one_line_error(result)


@pytest.mark.parametrize(
    ("args", "prog"),
    [
        (["run", "--db", "memory://"], "actae run"),
        (["bogus"], "actae"),
        (["events"], "actae events"),
    ],
)
def test_a_usage_error_is_one_line_and_status_2(args: list[str], prog: str) -> None:
    result = actae_cli(*args)

    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr  # no usage block above it
    assert result.stderr.startswith(f"{prog}: error: "), result.stderr
    assert result.stderr.rstrip().endswith(f"(see {prog} --help)")


@pytest.mark.parametrize(
    "args",
    [
        ["project", "--db", "memory://", "--batch-size", "0"],
        ["project", "--db", "memory://", "--batch-size", "-5"],
        ["worker", "--db", "memory://", "--import", "x", "--poll-interval", "-1"],
        ["worker", "--db", "memory://", "--import", "x", "--lease", "-1"],
        ["worker", "--db", "memory://", "--import", "x", "--lease", "nan"],
        ["events", "--db", "memory://", "x", "--after", "1e23"],
        ["events", "--db", "memory://", "x", "--limit", str(2**80)],
        ["state", "--db", "memory://", "x", "--cursor", "0"],
        ["drill", "--runs", "-1"],
        ["drill", "--kill-after", "7"],
    ],
    ids=lambda args: " ".join(args[:1] + args[-2:]),
)
def test_a_numeric_option_out_of_range_is_one_line_and_status_2(args: list[str]) -> None:
    result = actae_cli(*args)

    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"Invalid value for '{args[-2]}': " in result.stderr


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (["drill", "--crash-point", "nowhere"], "'after-model-call', 'during-commit'"),
        (["drill", "--db-fault", "melt"], "'restart', 'crash', 'terminate'"),
        (["console", "add-user", "a", "--auth-file", "f", "--role", "admin"], "'viewer'"),
    ],
    ids=lambda value: " ".join(value[:1] + value[-2:]) if isinstance(value, list) else "",
)
def test_a_choice_outside_its_list_is_one_line_and_status_2(args: list[str], allowed: str) -> None:
    result = actae_cli(*args)

    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"Invalid value for '{args[-2]}': " in result.stderr
    assert allowed in result.stderr


def test_a_console_without_users_is_one_line_and_status_2() -> None:
    line = assert_one_line_error(actae_cli("console", "--db", "memory://"))

    assert line.startswith("invalid --auth-file: the console refuses to start without users")
    assert "actae console add-user NAME --role operator --auth-file FILE" in line


def test_db_then_db_file_then_actae_db_exactly_one_source_wins(tmp_path: Path) -> None:
    urls, runs = {}, {}
    for source in ("db", "file", "env"):
        urls[source] = f"sqlite:///{tmp_path / source}.db"
        with actae.open(urls[source]) as store:
            runs[source] = str(store.start_run(source, agent_id="a", state={}).run_id)
    db_file = tmp_path / "store-url"
    db_file.write_text(f"  {urls['file']}  \n# anything after the first line is ignored\n")
    every_source = ["--db", urls["db"], "--db-file", str(db_file)]
    env = {"ACTAE_DB": urls["env"]}

    def workflow_of(*args: str) -> str:
        result = actae_cli("run", *args, environ=env)
        assert result.returncode == 0, result.stderr
        return str(json.loads(result.stdout)["workflow_id"])

    assert workflow_of(*every_source, runs["db"]) == "db"
    assert workflow_of("--db-file", str(db_file), runs["file"]) == "file"
    assert workflow_of(runs["env"]) == "env"
    # The losers are not consulted at all: the winner's store does not hold their runs.
    assert "not found" in assert_one_line_error(
        actae_cli("run", *every_source, runs["file"], environ=env)
    )


def test_no_store_given_is_one_line_and_status_2() -> None:
    """Through a real process too: what it finds in its environment decides."""
    result = actae_process("run", SOME_ID, environ={})

    line = assert_one_line_error(result)
    assert "--db URL, --db-file PATH or set ACTAE_DB" in line


@pytest.mark.parametrize("content", ["", "\n\n", "   \n"], ids=["empty", "blank lines", "spaces"])
def test_a_db_file_without_a_url_is_one_line_and_status_2(tmp_path: Path, content: str) -> None:
    db_file = tmp_path / "store-url"
    db_file.write_text(content)

    result = actae_cli("run", "--db-file", str(db_file), SOME_ID)

    assert "holds no store URL" in assert_one_line_error(result)


def test_an_unreadable_db_file_is_one_line_and_status_2(tmp_path: Path) -> None:
    not_text = tmp_path / "binary"
    not_text.write_bytes(b"\xff\xfe\x00garbage")
    for path in (tmp_path, not_text):  # a folder; bytes that are not UTF-8
        line = assert_one_line_error(actae_cli("run", "--db-file", str(path), SOME_ID))
        assert line.startswith(f"invalid --db-file: cannot read {path}: ")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://h/db?pool_size=abc",
        "postgresql://h:abc/db",
        "postgresql://h/db?sslmode=sometimes",
        "postgresql://h/db?service=prod",
        "mysql://h/db",
    ],
)
def test_a_bad_url_from_any_source_is_one_line_and_status_2(url: str, tmp_path: Path) -> None:
    db_file = tmp_path / "store-url"
    db_file.write_text(url + "\n")
    for args, env in [
        (["--db", url], {}),
        (["--db-file", str(db_file)], {}),
        ([], {"ACTAE_DB": url}),
    ]:
        line = assert_one_line_error(actae_cli("run", *args, SOME_ID, environ=env))
        assert line.startswith("invalid url"), line


def test_actae_db_is_used_by_the_commands_that_create_a_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'from-env.db'}"

    result = actae_cli("worker", "--import", "json", "--once", environ={"ACTAE_DB": url})

    assert result.returncode == 0, result.stderr
    assert (tmp_path / "from-env.db").is_file()
