"""The origin check compares a browser's ``Origin`` with the console's configured address.

Never with the request's ``Host`` header: a page that had a browser reach the console under
its own name (DNS rebinding: evil.example resolving to 127.0.0.1) sends ``Host:
evil.example`` with ``Origin: http://evil.example``, and the two agree. The console's own
origins are its host and port as configured (with the other names of loopback) and any
``--origin`` given for a reverse proxy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import actae
from actae.adapters.cli.main import main
from actae.adapters.console.app import create_app
from actae.adapters.console.auth import add_user, load_users
from actae.adapters.console.guards import own_origins, parse_origin

PORT = 8123
OWN = f"http://127.0.0.1:{PORT}"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("origin")


@pytest.fixture(scope="module")
def token(folder: Path) -> str:
    return add_user(folder / "users.json", "olive", "operator")


@pytest.fixture(scope="module")
def client(folder: Path, token: str) -> Iterator[TestClient]:
    store = actae.open(f"sqlite:///{folder / 'runs.db'}")
    app = create_app(
        store, load_users(folder / "users.json"), origins=own_origins("127.0.0.1", PORT)
    )
    with TestClient(app, base_url=OWN) as opened:
        yield opened


def sign_in(client: TestClient, token: str, headers: dict[str, str]) -> int:
    response = client.post("/login", data={"token": token}, headers=headers, follow_redirects=False)
    client.cookies.clear()
    return response.status_code


def test_a_forged_host_that_matches_a_forged_origin_is_refused(
    client: TestClient, token: str
) -> None:
    for host in ("evil.example", f"evil.example:{PORT}", "127.0.0.1:9999"):
        forged = {"Host": host, "Origin": f"http://{host}"}
        response = client.post(
            "/login", data={"token": token}, headers=forged, follow_redirects=False
        )
        assert response.status_code == 403, (host, response.text)
        assert response.json()["error"]["code"] == "cross_origin"
        assert "set-cookie" not in response.headers
        assert OWN in response.json()["error"]["message"]  # says what the console is


def test_the_configured_origin_passes_whatever_host_the_request_names(
    client: TestClient, token: str
) -> None:
    for origin in (OWN, f"http://localhost:{PORT}", f"http://[::1]:{PORT}", OWN.upper()):
        assert sign_in(client, token, {"Host": "evil.example", "Origin": origin}) == 303, origin
    assert sign_in(client, token, {}) == 303  # no browser headers: not a browser, as before


def test_own_origins_are_the_configured_host_and_port() -> None:
    assert own_origins("127.0.0.1", PORT) == {
        OWN,
        f"http://localhost:{PORT}",
        f"http://[::1]:{PORT}",
    }
    assert own_origins("10.0.0.5", 80) == {"http://10.0.0.5"}  # the scheme's port is implied
    assert own_origins("::1", 9000) == {
        "http://[::1]:9000",
        "http://127.0.0.1:9000",
        "http://localhost:9000",
    }
    # every interface: no name is known, so only loopback and what --origin says
    assert own_origins("0.0.0.0", 9000, ["https://Console.Example.com/"]) == {  # noqa: S104
        "http://127.0.0.1:9000",
        "http://localhost:9000",
        "http://[::1]:9000",
        "https://console.example.com",
    }


@pytest.mark.parametrize(
    "origin",
    ["console.example.com", "ftp://x", "https://", "https://a/b", "https://u@a", "https://a?x"],
)
def test_a_bad_origin_is_refused(origin: str) -> None:
    with pytest.raises(actae.ValidationError) as refused:
        parse_origin(origin)
    assert refused.value.field == "origin"


def test_a_bad_origin_option_is_one_line_and_exit_status_2(
    folder: Path, token: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{folder / 'runs.db'}"
    auth = str(folder / "users.json")
    code = main(["console", "--db", url, "--auth-file", auth, "--origin", "example.com"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "http(s)://HOST[:PORT]" in err
