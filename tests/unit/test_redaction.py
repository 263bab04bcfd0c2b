"""Redaction before storage: the built-in patterns, the walk, user patterns and the checks."""

from __future__ import annotations

import copy
import math
import re
import string
from typing import Any

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from actae.adapters.redaction.patterns import PATTERNS, SECRET_KEYS, luhn_valid, marker
from actae.adapters.redaction.redactors import (
    builtin_redactor,
    chain,
    redact_secrets,
    redactor_from,
)
from actae.domain.errors import ValidationError
from actae.domain.redaction import Redacted, checked, merge_counts

# Published example or made-up credentials, none of them live.
OPENAI = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7dEf0h"
OPENAI_LEGACY = "sk-" + "T3BlbkFJ" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
ANTHROPIC = "sk-ant-api03-" + "x9Y8w7V6u5T4s3R2q1P0o9N8m7L6k5J4i3H2g1F0e9D8c7B6a5Z4y3X2w1V0" + "AA"
AWS = "AKIAIOSFODNN7EXAMPLE"
AWS_TEMPORARY = "ASIAY34FZKBOKMUTVV7A"
GITHUB = "ghp_" + "wWPw5k4aXcaT4fNP0UcnZwJUVFk6LO0pINUx"
GITHUB_APP = "ghs_" + "16C7e42F292c6912E7710c838347Ae178B4a"
GITHUB_FINE = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
GOOGLE = "AIza" + "SyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
STRIPE_RESTRICTED = "rk_live_" + "51H8xKjLkZ0aBcDeFgHiJkLm"
STRIPE_TEST = "sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc"
VISA = "4111111111111111"
AMEX = "378282246310005"
MASTERCARD = "5555555555554444"
GIT_SHA = "3f786850e387550fdab836ed7e6dc881de23001b"
UUID = "123e4567-e89b-12d3-a456-426614174000"
ISO_TIMESTAMP = "2026-05-09T07:35:25.123456+00:00"


def redacted(text: str) -> tuple[str, dict[str, int]]:
    result = redact_secrets(text)
    return result.value, result.counts


# --- api_key ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        OPENAI,
        OPENAI_LEGACY,
        ANTHROPIC,
        AWS,
        AWS_TEMPORARY,
        GITHUB,
        GITHUB_APP,
        "gho_" + GITHUB[4:],
        "ghu_" + GITHUB[4:],
        "ghr_" + GITHUB[4:],
        GITHUB_FINE,
        SLACK,
        "xoxp-" + SLACK[5:],
        GOOGLE,
        STRIPE,
        STRIPE_RESTRICTED,
        STRIPE_TEST,
    ],
)
def test_provider_keys_are_redacted_wherever_they_stand(key: str) -> None:
    for text, expected in [
        (key, "[redacted:api_key]"),
        (f"OPENAI_API_KEY={key}", "OPENAI_API_KEY=[redacted:api_key]"),
        (f'{{"key": "{key}"}}', '{"key": "[redacted:api_key]"}'),
        (f"use {key}.", "use [redacted:api_key]."),
    ]:
        assert redacted(text) == (expected, {"api_key": 1})


@pytest.mark.parametrize(
    "text",
    [
        "sk-learn-compatible-estimators-and-pipelines-guide",  # no digit
        "sk-short-12345",  # too short
        "task-" + "a1" * 20,  # "sk-" inside a word
        "ASIAN-MARKETS-RALLY",
        "AKIAIOSFODNN7EXAMPLEX",  # 17 characters after the prefix
        "xAKIAIOSFODNN7EXAMPLE",  # inside a word
        "ghp_tooshort123",
        "pk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",  # a publishable key is public
        "AIza" + "short",
        "xoxb-nodigitsatall",
    ],
)
def test_look_alikes_are_not_api_keys(text: str) -> None:
    assert redacted(text) == (text, {})


# --- bearer_token ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl",
            "Authorization: Bearer [redacted:bearer_token]",
        ),
        ("bearer abc123def456", "bearer [redacted:bearer_token]"),
        ("BEARER\tmF_9.B5f-4.1JqM", "BEARER\t[redacted:bearer_token]"),
        ("Bearer abcdefghijklmnopqrstuvwxyz==, next", "Bearer [redacted:bearer_token], next"),
        (f"Bearer {OPENAI}", "Bearer [redacted:bearer_token]"),
    ],
)
def test_a_bearer_token_goes_and_the_word_stays(text: str, expected: str) -> None:
    assert redacted(text) == (expected, {"bearer_token": 1})


@pytest.mark.parametrize(
    "text",
    [
        "the bearer of bad news",
        "Bearer authentication uses a token",
        "bearer short1",  # fewer than 8 characters
        "cupbearer 1234567890abcdef",
        "Bearer [redacted:bearer_token]",
    ],
)
def test_prose_about_bearers_is_kept(text: str) -> None:
    assert redacted(text) == (text, {})


# --- card_number ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (VISA, "[redacted:card_number]"),
        ("card 4111 1111 1111 1111 exp 12/26", "card [redacted:card_number] exp 12/26"),
        ("4111-1111-1111-1111", "[redacted:card_number]"),
        ("amex 3782 822463 10005", "amex [redacted:card_number]"),
        (
            f"mc {MASTERCARD}, visa {VISA}.",
            "mc [redacted:card_number], visa [redacted:card_number].",
        ),
        ("4111 1111 1111 1111 12 26", "[redacted:card_number] 12 26"),  # expiry in the run
        ("qty 2 4111 1111 1111 1111", "qty 2 [redacted:card_number]"),  # quantity in the run
        ("x5 4111 1111 1111 1111", "x5 [redacted:card_number]"),
        ("4111 1111 1111 1111 2@x", "[redacted:card_number] 2@x"),
        ("4111 1111 1111 1111 2.5", "[redacted:card_number] 2.5"),
    ],
)
def test_card_numbers_that_pass_luhn_are_redacted(text: str, expected: str) -> None:
    value, counts = redacted(text)
    assert value == expected
    assert counts == {"card_number": expected.count("[redacted:card_number]")}


@pytest.mark.parametrize(
    "text",
    [
        "4111111111111112",  # 16 digits, Luhn fails
        "order 4111 1111 1111 1112",
        "1700000000000",  # an epoch timestamp in ms
        "1715242525123456789",  # in ns, 19 digits
        "0000000000000000",  # zero padding passes Luhn, but no card starts with 0
        "12345678901234567890123",  # too long
        ISO_TIMESTAMP,
        "2026-05-09 2026-05-10",  # two dates: 16 digits, but not grouped like a card
        UUID,
        "12345678-1234-1234-1234-123456789012",  # a UUID of digits only
        GIT_SHA,
        "0.4111111111111111",  # a decimal fraction
        "4111111111111111.5",
        "id4111111111111111",  # inside a word
        "4111111111111111abc",
        "4111 1111 1111 1111x",
        "+1 555 123 4567",
    ],
)
def test_numbers_that_are_no_cards_are_kept(text: str) -> None:
    assert redacted(text) == (text, {})


def test_luhn() -> None:
    assert luhn_valid(VISA)
    assert luhn_valid(AMEX)
    assert luhn_valid("79927398713")
    assert not luhn_valid("79927398710")
    assert not luhn_valid("4111111111111112")


# --- email ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice@example.com", "[redacted:email]"),
        ("mail Alice.Smith+tag@mail.example.co.uk.", "mail [redacted:email]."),
        ("<bob_o'x@example.org>", "<bob_o'[redacted:email]>"),
        ("mailto:x-y%z@sub-domain.example.travel?subject=hi", "mailto:[redacted:email]?subject=hi"),
        ("a@b.io, c@d.io", "[redacted:email], [redacted:email]"),
    ],
)
def test_email_addresses_are_redacted(text: str, expected: str) -> None:
    value, counts = redacted(text)
    assert value == expected
    assert counts == {"email": expected.count("[redacted:email]")}


@pytest.mark.parametrize(
    "text",
    [
        "pkg@1.2.3",
        "@property",
        "user@localhost",
        "icon@2x.png",
        "logo@3x.JPG",
        "a @ b.com",
        "@b.com",
    ],
)
def test_things_with_an_at_that_are_no_addresses_are_kept(text: str) -> None:
    assert redacted(text) == (text, {})


# --- secret keys ----------------------------------------------------------------------------


def test_values_under_telling_keys_are_replaced_whatever_they_look_like() -> None:
    document = {
        "password": "hunter2",
        "Secret": "s",
        "API-Key": "k",
        "apiKey": "k",
        "x-api-key": "k",
        "TOKEN": "t",
        "Authorization": "Basic dXNlcjpwYXNz",
        "access_token": "a",
        "refresh-token": "r",
        "clientSecret": "c",
    }
    result = redact_secrets(document)
    assert result.value == dict.fromkeys(document, "[redacted:secret_field]")
    assert result.counts == {"secret_field": len(document)}
    assert {key.lower() for key in SECRET_KEYS} >= {"password", "token", "client_secret"}


def test_telling_keys_leave_other_values_and_lookalike_keys_alone() -> None:
    document = {
        "password": None,
        "token": 42,
        "secret": "",  # nothing to hide
        "api_key": "[redacted:api_key]",  # redacted already
        "authorization": {"scheme": "basic"},  # containers are walked, not replaced
        "max_tokens": "4096",
        "token_count": "12",
        "passwords_changed": "yes",
        "logprobs": [{"token": "Hello", "logprob": -0.25, "top_logprobs": []}],
    }
    assert redact_secrets(document) == Redacted(document, {})
    assert redact_secrets({"password": "[redacted:x] hunter2 ]"}).value == {
        "password": "[redacted:secret_field]"
    }


def test_secret_keys_can_be_turned_off_or_chosen() -> None:
    document = {"password": "hunter2", "pin": "1234"}
    assert builtin_redactor(secret_keys=())(document).value == document
    assert builtin_redactor(secret_keys=["PIN"])(document).value == {
        "password": "hunter2",
        "pin": "[redacted:secret_field]",
    }


# --- the walk ---------------------------------------------------------------------------------


def test_a_nested_document_is_redacted_everywhere_and_counted() -> None:
    document = {
        "run": {"steps": [{"result": f"key {OPENAI} for alice@example.com"}, [VISA, 7, None]]},
        "headers": ("Bearer abc123def456", {"password": "hunter2"}),
        "scores": [0.5, True, -3],
        "bob@example.com": {"note": f"also {AWS}"},
    }
    result = redact_secrets(document)
    assert result.value == {
        "run": {
            "steps": [
                {"result": "key [redacted:api_key] for [redacted:email]"},
                ["[redacted:card_number]", 7, None],
            ]
        },
        "headers": ["Bearer [redacted:bearer_token]", {"password": "[redacted:secret_field]"}],
        "scores": [0.5, True, -3],
        "[redacted:email]": {"note": "also [redacted:api_key]"},
    }
    assert result.counts == {
        "api_key": 2,
        "email": 2,
        "card_number": 1,
        "bearer_token": 1,
        "secret_field": 1,
    }


def test_keys_that_redact_alike_stay_apart_in_order() -> None:
    document = {"a@example.com": 1, "[redacted:email]": 2, "b@example.com": 3, "x": 4}
    result = redact_secrets(document)
    assert list(result.value.items()) == [
        ("[redacted:email]#2", 1),
        ("[redacted:email]", 2),
        ("[redacted:email]#3", 3),
        ("x", 4),
    ]
    assert result.counts == {"email": 2}
    assert redact_secrets(result.value) == Redacted(result.value, {})


def test_the_input_is_never_mutated_and_the_output_shares_no_container() -> None:
    document: dict[str, Any] = {
        "a": [{"password": "p", "b": ["alice@example.com", {"c": []}]}],
        "alice@example.com": {"d": VISA},
        "clean": {"e": ["f"]},
    }
    before = copy.deepcopy(document)
    result = redact_secrets(document)
    assert document == before
    assert result.value != document

    def containers(value: Any) -> list[Any]:
        if isinstance(value, dict):
            return [value, *(c for item in value.values() for c in containers(item))]
        if isinstance(value, list):
            return [value, *(c for item in value for c in containers(item))]
        return []

    originals = {id(c) for c in containers(document)}
    assert not originals & {id(c) for c in containers(result.value)}
    clean = redact_secrets(before["clean"])
    assert clean.value == before["clean"]
    assert clean.value is not before["clean"]


def test_scalars_and_texts_with_nul_are_handled() -> None:
    assert redact_secrets(None) == Redacted(None, {})
    assert redact_secrets(3.5) == Redacted(3.5, {})
    assert redact_secrets([]) == Redacted([], {})
    # A NUL cannot be stored, but redaction must not be fooled by it either.
    assert redact_secrets(["a\x00b alice@example.com", "x\x00" + VISA]).value == [
        "a\x00b [redacted:email]",
        "x\x00[redacted:card_number]",
    ]


def test_a_document_that_is_not_plain_json_is_refused() -> None:
    for bad in [{"a": {1, 2}}, {1: "x"}, [object()], {"a": b"bytes"}]:
        with pytest.raises(ValidationError) as error:
            redact_secrets(bad)
        assert error.value.field == "document"
    looped: list[Any] = []
    looped.append(looped)
    deep: Any = "x"
    for _ in range(64):
        deep = [deep]
    assert redact_secrets(deep).value == deep  # the document is level 1, as in validation
    assert checked(Redacted(deep, {}), where="redact").value == deep
    for bad in [looped, {"d": deep}, [deep]]:
        with pytest.raises(ValidationError, match="deeper than 64"):
            redact_secrets(bad)
        with pytest.raises(ValidationError, match="deeper than 64"):
            checked(Redacted(bad, {}), where="redact")


def test_built_in_patterns_can_be_chosen() -> None:
    text = f"alice@example.com {VISA} {AWS}"
    only_keys = builtin_redactor(["api_key"])
    assert only_keys(text) == Redacted(
        f"alice@example.com {VISA} [redacted:api_key]", {"api_key": 1}
    )
    assert builtin_redactor([], secret_keys=())(text) == Redacted(text, {})
    with pytest.raises(ValidationError, match="unknown built-in 'phone'"):
        builtin_redactor(["phone"])
    with pytest.raises(ValidationError, match="collection of key names"):
        builtin_redactor(secret_keys="pin")  # noqa: S106 - a key name, given the wrong way
    assert list(PATTERNS) == [
        "private_key",
        "bearer_token",
        "jwt",
        "api_key",
        "url_password",
        "cookie",
        "secret_assignment",
        "email",
        "card_number",
    ]


# --- user patterns and chains ---------------------------------------------------------------


def test_a_user_redactor_from_named_regexes() -> None:
    redact = redactor_from(
        {"employee_id": r"\bEMP-[0-9]{6}\b", "codename": re.compile("project (?:x|y)", re.I)}
    )
    result = redact({"who": "EMP-123456 and EMP-654321 on Project X", "EMP-000001": [1]})
    assert result.value == {
        "who": "[redacted:employee_id] and [redacted:employee_id] on [redacted:codename]",
        "[redacted:employee_id]": [1],
    }
    assert result.counts == {"employee_id": 3, "codename": 1}
    assert redactor_from({"ssn": "x*"})("abc") == Redacted("abc", {})  # empty matches skip
    assert redactor_from({"n": "[0-9]+"}, secret_keys=["pin"])({"pin": "x", "a": "1"}) == Redacted(
        {"pin": "[redacted:secret_field]", "a": "[redacted:n]"}, {"secret_field": 1, "n": 1}
    )


@pytest.mark.parametrize(
    ("patterns", "field"),
    [
        ({"": "x"}, "patterns."),
        ({"has space": "x"}, "patterns.has space"),
        ({"bad]": "x"}, "patterns.bad]"),
        ({"ok": "("}, "patterns.ok"),
        ({"ok": re.compile(b"x")}, "patterns.ok"),
        ({"ok": 3}, "patterns.ok"),
        ({}, "patterns"),
        ([("ok", "x")], "patterns"),
    ],
)
def test_bad_user_patterns_are_refused(patterns: Any, field: str) -> None:
    with pytest.raises(ValidationError) as error:
        redactor_from(patterns)
    assert error.value.field == field


def test_a_chain_runs_in_turn_and_sums_counts() -> None:
    def shout(document: Any) -> Redacted:
        return Redacted({**document, "note": document["note"].upper()}, {"email": 2, "loud": 1})

    redact = chain(redact_secrets, redactor_from({"ticket": "T-[0-9]+"}), shout)
    result = redact({"note": "alice@example.com about T-42", "password": "p"})
    assert result.value == {
        "note": "[REDACTED:EMAIL] ABOUT [REDACTED:TICKET]",
        "password": "[redacted:secret_field]",
    }
    assert result.counts == {"email": 3, "ticket": 1, "secret_field": 1, "loud": 1}
    assert chain(chain(redact_secrets))({"a": "b"}) == Redacted({"a": "b"}, {})


def test_a_chain_checks_what_a_user_callable_hands_on() -> None:
    def leaky(document: Any) -> Any:
        return {"value": document}

    with pytest.raises(ValidationError) as error:
        chain(redact_secrets, leaky)({"a": 1})
    assert error.value.field == "chain[1]"
    with pytest.raises(ValidationError):
        chain()
    with pytest.raises(ValidationError) as error:
        chain(redact_secrets, "not callable")  # type: ignore[arg-type]
    assert error.value.field == "redactors[1]"


def test_merge_counts() -> None:
    assert merge_counts({"a": 1, "b": 0}, {"a": 2, "c": 3}, {}) == {"a": 3, "c": 3}
    assert marker("email") == "[redacted:email]"


# --- checked ----------------------------------------------------------------------------------


def test_checked_passes_plain_json_and_drops_zero_counts() -> None:
    good = Redacted({"a": [1, 2.5, True, None, "x", ("t",)], "b": {}}, {"email": 1})
    assert checked(good, where="redact") is good
    assert checked(Redacted("x", {"email": 0, "api_key": 2}), where="redact") == Redacted(
        "x", {"api_key": 2}
    )


@pytest.mark.parametrize(
    ("result", "field", "reason"),
    [
        ({"value": 1}, "redact", "must return Redacted"),
        (("x", {}), "redact", "must return Redacted"),
        (Redacted({"a": {1, 2}}, {}), "redact.value.a", "set is not plain JSON"),
        (Redacted({"a": [1, object()]}, {}), "redact.value.a.1", "object is not plain JSON"),
        (Redacted({"a": math.nan}, {}), "redact.value.a", "not a JSON number"),
        (Redacted([math.inf], {}), "redact.value.0", "not a JSON number"),
        (Redacted({"a": {2: "x"}}, {}), "redact.value.a", "JSON keys are strings"),
        (Redacted(b"bytes", {}), "redact.value", "bytes is not plain JSON"),
        (Redacted("x", [("email", 1)]), "redact.counts", "must be a dict"),  # type: ignore[arg-type]
        (Redacted("x", {"email": -1}), "redact.counts.email", "must be >= 0"),
        (Redacted("x", {"email": 1.0}), "redact.counts.email", "expected an int"),  # type: ignore[dict-item]
        (Redacted("x", {"email": True}), "redact.counts.email", "expected an int"),
        (Redacted("x", {"email": "1"}), "redact.counts.email", "expected an int"),  # type: ignore[dict-item]
        (Redacted("x", {"": 1}), "redact.counts.", "must not be empty"),
        (Redacted("x", {3: 1}), "redact.counts.3", "expected a string"),  # type: ignore[dict-item]
    ],
)
def test_checked_refuses_what_is_not_plain_json_or_counts(
    result: Any, field: str, reason: str
) -> None:
    with pytest.raises(ValidationError) as error:
        checked(result, where="redact")
    assert error.value.field == field
    assert reason in error.value.reason


def test_checked_refuses_documents_too_deep_or_containing_themselves() -> None:
    looped: dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(ValidationError, match="deeper than 64"):
        checked(Redacted(looped, {}), where="redact")


# --- properties -------------------------------------------------------------------------------

ALPHABET = string.ascii_lowercase + "éßüø中"
SAFE_WORDS = st.text(ALPHABET, min_size=1, max_size=12).filter(lambda word: word != "bearer")
SAFE_TOKENS = st.one_of(
    SAFE_WORDS,
    st.integers(0, 10**12 - 1).map(str),  # at most 12 digits
    st.uuids().map(str),
    st.binary(min_size=20, max_size=20).map(bytes.hex),  # a git sha
    st.datetimes().map(lambda moment: moment.isoformat()),
)
# Tokens are joined with ", " so that numbers never run into each other.
SAFE_TEXT = st.lists(SAFE_TOKENS, max_size=6).map(", ".join)
SAFE_KEYS = SAFE_WORDS.filter(
    lambda key: key.replace("-", "").replace("_", "") not in {"password", "secret", "token"}
)


def json_documents(texts: st.SearchStrategy[str], keys: st.SearchStrategy[str]) -> Any:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        texts,
    )
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4)
        ),
        max_leaves=16,
    )


@settings(max_examples=150)
@given(json_documents(SAFE_TEXT, SAFE_KEYS))
def test_a_document_without_secrets_comes_back_equal_and_uncounted(document: Any) -> None:
    assert redact_secrets(document) == Redacted(document, {})


def _luhn_completed(digits: str) -> str:
    return next(digits + check for check in string.digits if luhn_valid(digits + check))


def _shaped(number: str, separator: str, sizes: tuple[int, ...]) -> str:
    parts, start = [], 0
    for size in sizes:
        parts.append(number[start : start + size])
        start += size
    return separator.join(parts)


ALNUM = string.ascii_letters + string.digits


def _key(prefix: str, size: int, alphabet: str = ALNUM) -> st.SearchStrategy[str]:
    body = st.text(alphabet, min_size=size - 1, max_size=size - 1)
    return st.tuples(body, st.sampled_from(string.digits), st.integers(0, size - 1)).map(
        lambda parts: prefix + parts[0][: parts[2]] + parts[1] + parts[0][parts[2] :]
    )


API_KEYS = st.one_of(
    _key("sk-", 48),
    _key("sk-proj-", 120, ALNUM + "_-"),
    _key("sk-ant-api03-", 95, ALNUM + "_-"),
    _key("AKIA", 16, string.ascii_uppercase + string.digits),
    _key("ASIA", 16, string.ascii_uppercase + string.digits),
    st.sampled_from(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]).flatmap(lambda p: _key(p, 36)),
    _key("github_pat_", 82, ALNUM + "_"),
    st.sampled_from(["xoxa-", "xoxb-", "xoxp-", "xoxr-"]).flatmap(
        lambda p: _key(p, 40, ALNUM + "-")
    ),
    _key("AIza", 35, ALNUM + "_-"),
    st.sampled_from(["sk_live_", "rk_live_", "sk_test_", "rk_test_"]).flatmap(
        lambda p: _key(p, 24)
    ),
)
CARDS = st.one_of(
    st.tuples(
        st.text("23456789", min_size=1, max_size=1),
        st.text(string.digits, min_size=14, max_size=14),
        st.sampled_from([" ", "-"]),
        st.sampled_from([(16,), (4, 4, 4, 4)]),
    ).map(lambda p: _shaped(_luhn_completed(p[0] + p[1]), p[2], p[3])),
    st.tuples(st.sampled_from(["34", "37"]), st.text(string.digits, min_size=12, max_size=12)).map(
        lambda p: _shaped(_luhn_completed(p[0] + p[1]), " ", (4, 6, 5))
    ),
)
LOCAL = st.text(string.ascii_letters + string.digits + "._%+-", min_size=1, max_size=20)
LABEL = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=10)
EMAILS = st.tuples(
    LOCAL, st.lists(LABEL, min_size=1, max_size=3), st.sampled_from(["com", "org", "io", "museum"])
).map(lambda p: f"{p[0]}@{'.'.join(p[1])}.{p[2]}")
BEARER_TOKENS = st.one_of(
    st.text(ALNUM + "-._~+/", min_size=20, max_size=60),
    _key("", 12, ALNUM + "-._~+/"),
)

SECRETS = st.one_of(
    API_KEYS.map(lambda key: ("api_key", key, key)),
    CARDS.map(lambda card: ("card_number", card, card)),
    EMAILS.map(lambda email: ("email", email, email)),
    st.tuples(st.sampled_from(["Bearer", "bearer", "BEARER"]), BEARER_TOKENS).map(
        lambda p: ("bearer_token", f"{p[0]} {p[1]}", p[1])
    ),
)
PLACES = st.sampled_from(["value", "item", "key", "top"])


def _placed(text: str, place: str) -> Any:
    return {
        "value": {"result": {"output": text}},
        "item": [1, ["x", text]],
        "key": {"headers": {text: True}},
        "top": text,
    }[place]


@settings(max_examples=200)
@given(st.text(), SECRETS, st.text(), PLACES)
def test_a_secret_in_any_text_is_gone_and_counted(
    before: str, secret: tuple[str, str, str], after: str, place: str
) -> None:
    name, injected, hidden = secret
    assume(hidden not in before and hidden not in after)
    # "…bearer" just before a key makes it a bearer token: gone, but counted as one.
    assume(not re.search(r"(?i)bearer\s*$", before))
    result = redact_secrets(_placed(f"{before} {injected} {after}", place))
    assert hidden.encode() not in orjson.dumps(result.value)
    assert result.counts.get(name, 0) >= 1


TEXTS = st.one_of(
    st.text(),
    SAFE_TEXT,
    st.tuples(st.text(max_size=10), SECRETS, st.text(max_size=10)).map(
        lambda p: f"{p[0]}{p[1][1]}{p[2]}"
    ),
    st.sampled_from(["[redacted:email]", "Bearer [redacted:bearer_token]", *SECRET_KEYS]),
)


@settings(max_examples=200)
@given(json_documents(TEXTS, TEXTS | st.sampled_from(sorted(SECRET_KEYS))))
def test_redaction_is_idempotent(document: Any) -> None:
    once = redact_secrets(document)
    assert redact_secrets(once.value) == Redacted(once.value, {})
    assert checked(once, where="redact") == once
