"""Secrets the built-in redactor used to miss (issue 28, item 15), and near misses it keeps.

One case per kind: values under telling keys (``passwd``, ``pwd``, ``db_password``,
``aws_secret_access_key``, ``private_key``, ``cookie``), the same written as assignments in
text, PEM private keys, URL passwords, raw JWTs, Hugging Face and SendGrid tokens, and card
numbers written with dots. Every redacted text redacts to itself a second time.
"""

from __future__ import annotations

from typing import Any

import pytest

from actae.adapters.redaction.redactors import redact_secrets

# Made-up credentials in the providers' shapes, none of them live.
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"
SENDGRID = "SG." + "ngeVfQFYQlKU0ufo8x5d1A" + "." + "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr"
JWT = (
    "eyJhbGciOiJIUzI1NiJ9"
    + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0"
    + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)
OPENSSH = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "-----END OPENSSH PRIVATE KEY-----"
)

SECRET_FIELD = "[redacted:secret_field]"  # noqa: S105 - a marker


@pytest.mark.parametrize(
    "key", ["passwd", "pwd", "db_password", "aws_secret_access_key", "private_key", "cookie"]
)
def test_a_value_under_a_telling_key_is_redacted(key: str) -> None:
    result = redact_secrets({key: "hunter2-Xy", "user": "ada"})
    assert result.value == {key: SECRET_FIELD, "user": "ada"}
    assert result.counts == {"secret_field": 1}


@pytest.mark.parametrize(
    ("text", "expected", "counts"),
    [
        pytest.param(
            "passwd=hunter2",
            "passwd=[redacted:secret_assignment]",
            {"secret_assignment": 1},
            id="passwd",
        ),
        pytest.param(
            "mysql -u app --pwd=s3cr3t",
            "mysql -u app --pwd=[redacted:secret_assignment]",
            {"secret_assignment": 1},
            id="pwd",
        ),
        pytest.param(
            "DB_PASSWORD=correct horse",
            "DB_PASSWORD=[redacted:secret_assignment] horse",
            {"secret_assignment": 1},
            id="db_password",
        ),
        pytest.param(
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key = [redacted:secret_assignment]",
            {"secret_assignment": 1},
            id="aws_secret_access_key",
        ),
        pytest.param(
            '{"db_password": "hunter 2"}',
            '{"db_password": "[redacted:secret_assignment]"}',
            {"secret_assignment": 1},
            id="password-in-json-text",
        ),
        pytest.param(
            f"key:\n{PEM}\nend", "key:\n[redacted:private_key]\nend", {"private_key": 1}, id="pem"
        ),
        pytest.param(OPENSSH, "[redacted:private_key]", {"private_key": 1}, id="pem-openssh"),
        pytest.param(
            PEM.split("-----END", maxsplit=1)[0],
            "[redacted:private_key]",
            {"private_key": 1},
            id="pem-cut",
        ),
        pytest.param(
            "Cookie: session=9f8e7d6c; theme=dark",
            "Cookie: [redacted:cookie]",
            {"cookie": 1},
            id="cookie",
        ),
        pytest.param(
            "set-cookie: id=a3fWa; Path=/; HttpOnly",
            "set-cookie: [redacted:cookie]",
            {"cookie": 1},
            id="set-cookie",
        ),
        pytest.param(
            "postgresql://app:s3cret@db.internal/prod",
            "postgresql://app:[redacted:url_password]@db.internal/prod",
            {"url_password": 1},
            id="url-password",
        ),
        pytest.param(f"token {JWT} ok", "token [redacted:jwt] ok", {"jwt": 1}, id="jwt"),
        pytest.param(
            f"HF_TOKEN is {HF}", "HF_TOKEN is [redacted:api_key]", {"api_key": 1}, id="hf"
        ),
        pytest.param(
            f"key: {SENDGRID}.", "key: [redacted:api_key].", {"api_key": 1}, id="sendgrid"
        ),
        pytest.param(
            "card 4111.1111.1111.1111, exp 12/29",
            "card [redacted:card_number], exp 12/29",
            {"card_number": 1},
            id="card-with-dots",
        ),
    ],
)
def test_a_secret_in_text_is_redacted(text: str, expected: str, counts: dict[str, int]) -> None:
    result = redact_secrets(text)
    assert (result.value, result.counts) == (expected, counts)
    again = redact_secrets(result.value)
    assert (again.value, again.counts) == (expected, {})


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("password: required, at least 12 characters", id="prose-password"),
        pytest.param("cd /srv && pwd", id="pwd-command"),
        pytest.param("max_tokens=1024 token_count=7", id="token-counts"),
        pytest.param("port=5432 timeout=30", id="not-secret-names"),
        pytest.param("max_token=4096", id="a-telling-name-holding-a-number"),
        pytest.param("monkey=banana keyboard=qwerty", id="key-inside-a-word"),
        pytest.param("password_reset_url=https://example.com/reset", id="password-prefix"),
        pytest.param("https://example.com:8443/path?q=1", id="url-with-port"),
        pytest.param("mailto:ada@example", id="no-url-userinfo"),
        pytest.param("the cookie: chocolate chip", id="prose-cookie"),
        pytest.param("eyJhbGciOiJIUzI1NiJ9 alone", id="jwt-header-only"),
        pytest.param("hf_short123", id="hf-too-short"),
        pytest.param("SG.short.parts", id="sendgrid-too-short"),
        pytest.param("version 2024.0101.1234", id="dotted-version"),
        pytest.param("192.168.100.200", id="ip-address"),
        pytest.param("4111.1111.1111.1112", id="dotted-not-luhn"),
        pytest.param(
            "-----BEGIN PUBLIC KEY-----\nMIIBIjANBg\n-----END PUBLIC KEY-----", id="pem-public"
        ),
    ],
)
def test_near_misses_are_kept(text: str) -> None:
    assert (redact_secrets(text).value, redact_secrets(text).counts) == (text, {})


def test_the_new_patterns_keep_a_document_s_shape() -> None:
    document: dict[str, Any] = {"env": ["DB_PASSWORD=x1y2z3", "PORT=8080"], "n": 3}
    result = redact_secrets(document)
    assert result.value == {
        "env": ["DB_PASSWORD=[redacted:secret_assignment]", "PORT=8080"],
        "n": 3,
    }
