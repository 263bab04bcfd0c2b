"""Redaction before storage: secrets leave step results, effect results and records.

Tools echo secrets back (API keys, bearer tokens, card numbers, e-mail addresses) and the
event log would keep them forever. A *redactor* cleans a JSON document before anything is
written; the event records what was redacted (pattern names and counts), never the secret.

The contract of a :data:`Redactor`:

- it takes a JSON document (dict with str keys, list, str, int, float, bool, None, nested)
  and returns a :class:`Redacted`: the cleaned document and ``{pattern name: count}``
  holding only non-zero counts;
- it returns a *new* value and never mutates its input (the caller may still hold and use
  the original); strings are immutable and may be shared;
- its output is plain JSON again. The wiring passes a user redactor's result through
  :func:`checked`, which refuses anything else with
  :class:`~actae.domain.errors.ValidationError`.

:data:`redact_secrets` is the built-in redactor. It walks the document and applies the
patterns of :data:`PATTERNS` to every string, **dict keys included** (a secret in a key is
still a secret stored forever; a key that redacts to one already present gets a ``#2``,
``#3``… suffix, so no entry is lost), and replaces the whole string value stored under a
telling key (:data:`SECRET_KEYS`), counted as ``secret_field``. Numbers, booleans and
``None`` are never changed, so a document keeps its shape and types except for redacted
strings. A redacted piece of text becomes ``[redacted:<name>]``; no pattern matches that
text, so redacting twice changes nothing the second time.

:func:`redactor_from` builds a redactor from a user's own named regexes and :func:`chain`
runs several in turn (counts summed), so a user adds their own to the defaults::

    redact = chain(redact_secrets, redactor_from({"employee_id": "EMP-[0-9]{6}"}))

Cost: the document is copied once (the copy is the result); its strings that are long
enough to hold a secret are joined, and each pattern first asks a cheap question of the
whole text (is there an ``@``, a ``bearer``, a run of digits; a few literal-led searches for
key prefixes). Only when one says yes does its regex run, and only when something was
redacted are the strings put back into the copy. A clean 4 KB step result costs about what
``copy.deepcopy`` of it costs (some 50 µs); adversarial text stays linear in its length.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from actae.domain.errors import ValidationError
from actae.domain.validation import MAX_DEPTH, key_label, require_text

__all__ = [
    "PATTERNS",
    "SECRET_FIELD",
    "SECRET_KEYS",
    "Redacted",
    "Redactor",
    "builtin_redactor",
    "chain",
    "checked",
    "luhn_valid",
    "marker",
    "merge_counts",
    "redact_secrets",
    "redactor_from",
    "redactor_of",
]


@dataclass(frozen=True, slots=True)
class Redacted:
    """A redactor's result: the cleaned document and how many secrets of each kind left it.

    ``counts`` maps pattern names to positive counts (a name that matched nothing is
    absent); it is what the event records, never the secrets themselves.
    """

    value: Any
    counts: dict[str, int]


Redactor = Callable[[Any], Redacted]
"""Takes a JSON document, returns a new, cleaned one with counts; never mutates its input."""

SECRET_FIELD = "secret_field"  # noqa: S105 - a count name, not a password
"""The count name of string values replaced because of the key they are stored under."""

SECRET_KEYS = frozenset(
    {
        "password",
        "secret",
        "api_key",
        "apikey",
        "x-api-key",
        "token",
        "authorization",
        "access_token",
        "refresh_token",
        "client_secret",
        "passwd",
        "pwd",
        "db_password",
        "aws_secret_access_key",
        "secret_access_key",
        "private_key",
        "secret_key",
        "cookie",
        "set-cookie",
    }
)
"""Keys whose string value is a secret whatever it looks like (random passwords and opaque
tokens match no pattern). Matched case-insensitively, ignoring ``-`` and ``_``: ``API-Key``,
``apiKey`` and ``CLIENT_SECRET`` all count; ``max_tokens`` or ``token_count`` do not.

One exception: a ``token`` next to a ``logprob`` key is a model's output token (the
log-probability entries of chat APIs), not a credential, and is kept.
"""


def marker(name: str) -> str:
    """The text that stands in for a redacted secret: ``[redacted:<name>]``."""
    return f"[redacted:{name}]"


def merge_counts(*counts: Mapping[str, int]) -> dict[str, int]:
    """Counts summed by name, zeros left out."""
    total: dict[str, int] = {}
    for each in counts:
        for name, count in each.items():
            total[name] = total.get(name, 0) + count
    return {name: count for name, count in total.items() if count}


def luhn_valid(digits: str) -> bool:
    """Whether a string of ASCII digits passes the Luhn checksum (every payment card does)."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        digit = ord(char) - 48
        if position % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


# --- The built-in patterns ------------------------------------------------------------------
#
# Each kind has a regex that finds it and cheap hints that say where it may match (substring
# and literal-led searches; a general regex search costs 5 to 15 ns per character). Lower
# length bounds keep short look-alikes out; there are no upper bounds and the quantifiers are
# possessive, so a match takes the whole token and never leaves a tail of the secret behind.
# No match starts in the middle of a word or a token (a lookbehind), which also keeps the
# searches linear: a failed attempt never scans a run that a later attempt scans again.

_API_KEY = (
    # Each branch starts with its literal prefix (the regex engine skips to those fast), then
    # looks behind it: not inside a longer word or token.
    # OpenAI (sk-…, sk-proj-…, sk-svcacct-…) and Anthropic (sk-ant-api03-…): real keys have
    # 48 to 160 random characters after the prefix, so 32 or more and at least one digit
    # keep kebab-case words such as "sk-learn-compatible-estimators" out.
    r"sk-(?<![A-Za-z0-9_-]sk-)(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{32,}+"
    # Stripe secret and restricted keys, live and test: 24 or 99 characters after the prefix.
    r"|[sr]k_(?<![A-Za-z0-9].k_)(?:live|test)_[A-Za-z0-9]{20,}+"
    # AWS access key ids (long-term AKIA, temporary ASIA): exactly 16 more upper-case
    # characters, and not part of a longer word.
    r"|A(?<![A-Za-z0-9]A)(?:KI|SI)A[A-Z0-9]{16}(?![A-Za-z0-9])"
    # GitHub tokens: classic personal, OAuth, user-to-server, server-to-server and refresh
    # (36 characters after the prefix) and fine-grained personal tokens (82).
    r"|gh(?<![A-Za-z0-9]gh)[pousr]_[A-Za-z0-9]{36,}+"
    r"|github_pat_(?<![A-Za-z0-9]github_pat_)[A-Za-z0-9_]{22,}+"
    # Slack bot, app, user and refresh tokens: they always carry numeric workspace ids.
    r"|xox(?<![A-Za-z0-9_-]xox)[abpr]-(?=[A-Za-z0-9-]*[0-9])[A-Za-z0-9-]{10,}+"
    # Google API keys: AIza and exactly 35 more characters.
    r"|AIza(?<![A-Za-z0-9]AIza)[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"
    # Hugging Face access tokens: hf_ and 34 letters (30 or more, letters and digits).
    r"|hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,}+"
    # SendGrid API keys: SG., a 22-character id, a dot, a 43-character secret.
    r"|SG\.(?<![A-Za-z0-9_.-]SG\.)[A-Za-z0-9_-]{16,}+\.[A-Za-z0-9_-]{30,}+"
)
# Where an api_key match can be (a superset of the matches above): each search has a literal
# first character, which the regex engine finds fast, and the rarest one of each prefix.
_API_KEY_HINTS = (
    re.compile(r"-(?:(?<=sk-)|(?<=xox[abpr]-))"),
    re.compile(r"_(?:(?<=[sr]k_live_)|(?<=[sr]k_test_)|(?<=gh[pousr]_)|(?<=github_pat_)|(?<=hf_))"),
    re.compile(r"A(?:KIA|SIA|Iza)|SG\."),
)

_BEARER_WORD = re.compile("[bB][eE][aA][rR][eE][rR]")
_TOKEN68 = r"[A-Za-z0-9._~+/-]"  # RFC 6750's token characters (then optional = padding)
_BEARER = (
    r"(?<![A-Za-z0-9_])[bB][eE][aA][rR][eE][rR][ \t]++(?P<token>"
    # A token has 8+ characters and a digit or punctuation, or 20+ characters: real tokens
    # (JWTs, OAuth tokens) do, "the bearer of bad news" and "Bearer authentication" do not.
    rf"(?=[A-Za-z]*+[0-9._~+/-]){_TOKEN68}{{8,}}+=*+"
    rf"|{_TOKEN68}{{20,}}+=*+"
    r")"
)

# A digit run: 13+ digits with single spaces or dashes between them, taken whole (so a failed
# candidate is never scanned again), not inside a word, a decimal fraction ("0.4111…") or an
# e-mail's local part. Which part of it is a card number
# is decided in Python (:func:`_card_numbers`): grouping, issuer digit and Luhn.
_CARD_RUN = (
    r"[0-9](?<![\w.,][0-9])(?:[ -]?[0-9]){12,}+"
    # Or written with dots, in groups of four ("4111.1111.1111.1111"): a dotted run of
    # other groups is a version, an address or a decimal, never a card.
    r"|[0-9](?<![\w.,][0-9])[0-9]{3}(?:\.[0-9]{4}){2,}+(?:\.[0-9]{1,3})?+"
)
_NOT_AFTER_CARD = re.compile(r"[\w@]|[.,][0-9]")  # checked in Python, so the run stays whole
_DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")

# A practical address: local part, @, dot-separated domain labels and an alphabetic top-level
# domain of 2 to 63 letters. No match starts inside a local part (the lookbehind), and
# "icon@2x.png"-style file names are not addresses.
_EMAIL = (
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]++@(?:[A-Za-z0-9-]++\.)+"
    r"(?!(?i:png|jpe?g|gif|svg|webp)(?![A-Za-z0-9-]))[A-Za-z]{2,63}(?![A-Za-z0-9-])"
)

# A PEM private key block (RSA, EC, OpenSSH, PKCS #8, encrypted), header to footer; one cut
# short (no footer) still goes whole. The body's characters are taken possessively and a
# dash only when no footer starts there, so the search stays linear.
_PRIVATE_KEY = (
    r"-----BEGIN (?:[A-Z0-9]++ )*PRIVATE KEY-----"
    r"(?:[A-Za-z0-9+/=\s:,.]|-(?!----END ))*+"
    r"(?:-----END (?:[A-Z0-9]++ )*PRIVATE KEY-----)?+"
)

# A JSON Web Token: three base64url parts, the first two JSON objects ("eyJ" is '{"').
_JWT = r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]*+"

# The password of a URL's user information: scheme://user:password@host.
_URL_USERINFO = (
    r"[A-Za-z][A-Za-z0-9+.-]*+://[^\s:/?#@\[\]]*+:(?!\[redacted:)(?P<secret>[^\s/?#@]++)@"
)

# A cookie header's value ("Cookie: session=...", "Set-Cookie: id=...; Path=/"), to the end
# of its line; only with a name=value pair after it, so prose about cookies stays.
_COOKIE = (  # from "cookie": a "Set-" before it stays
    r"(?<![A-Za-z0-9_])(?i:cookie):[ \t]*+"
    r"(?!\[redacted:)(?P<secret>[^\s;=]++=[^\r\n\x00]*+)"
)

# A secret written as an assignment in text: PASSWORD=..., db_passwd: "...", an .env line,
# a query string. A name that ends like a secret's (its last word is password, passwd, pass,
# pwd, secret, token, apikey, or key after "_" or "-"), then "=" or ":" before a quoted value
# (so "password: required" in prose is kept); the value goes, quotes and name stay. Values
# that are only digits are kept (a port, a count). The match starts at that last word: it is
# tried only where one is (:data:`_ANCHORED`), never scanned for.
_ASSIGNMENT = (
    r"(?:(?<![A-Za-z0-9])(?i:pass(?:word|wd)?|pwd|secret|token|apikey)|(?<=[_-])(?i:key))"
    r"[\"']?+[ \t]*+(?:=|:(?=[ \t]*+[\"']))[ \t]*+"
    r"(?:(?P<dq>\")|(?P<sq>'))?+(?!\[redacted:)(?P<secret>"
    r"(?(dq)[^\"\n\x00]++|(?(sq)[^'\n\x00]++"
    r"|(?![0-9]++(?![^\s\"',;&]))[^\s\"',;&]++)))"
)

PATTERNS: Mapping[str, re.Pattern[str]] = {
    "private_key": re.compile(_PRIVATE_KEY),
    "bearer_token": re.compile(_BEARER),
    "jwt": re.compile(_JWT),
    "api_key": re.compile(_API_KEY),
    "url_password": re.compile(_URL_USERINFO),
    "cookie": re.compile(_COOKIE),
    "secret_assignment": re.compile(_ASSIGNMENT),
    "email": re.compile(_EMAIL),
    "card_number": re.compile(_CARD_RUN),
}
"""The built-in patterns by name, in the order they apply.

- ``private_key``: a PEM private key block (``-----BEGIN ... PRIVATE KEY-----`` to its
  footer, or to the end of its body when cut short); public keys and certificates stay.
- ``jwt``: a raw JSON Web Token, three base64url parts of which the first two start with
  ``eyJ`` (a JSON object); one after ``Bearer`` counts as ``bearer_token``.
- ``url_password``: the password in a URL's user information (``scheme://user:pw@host``);
  the scheme, user and host stay.
- ``cookie``: the value of a ``Cookie:`` or ``Set-Cookie:`` header line, when it holds a
  ``name=value`` pair ("the cookie: chocolate" stays).
- ``secret_assignment``: the value of ``NAME=value``, ``--name=value`` or ``"name": "value"``
  in text, where the name is or ends in ``password``, ``passwd``, ``pass``, ``pwd``,
  ``secret``, ``secret_access_key``, ``private_key``, ``api_key``, ``apikey`` or a ``token``
  (``db_password``, ``AWS_SECRET_ACCESS_KEY``, ``HF_TOKEN``); ``:`` counts only before a
  quoted value, so prose such as "password: required" stays, and a value of digits alone
  (``port=5432``) is kept.

- ``bearer_token``: ``Bearer <token>``, any case; the word stays, the token goes. The token
  (RFC 6750 characters) has 8+ characters and a digit or punctuation, or 20+ characters.
- ``api_key``: prefixed provider keys: OpenAI ``sk-`` / ``sk-proj-`` and Anthropic
  ``sk-ant-`` (32+ characters after ``sk-``, one a digit), Stripe ``sk_live_`` /
  ``rk_live_`` / ``sk_test_`` / ``rk_test_`` (20+ more), AWS ``AKIA`` / ``ASIA`` (exactly 16
  more), GitHub ``ghp_`` / ``gho_`` / ``ghu_`` / ``ghs_`` / ``ghr_`` (36+) and
  ``github_pat_`` (22+), Slack ``xoxa-`` / ``xoxb-`` / ``xoxp-`` / ``xoxr-`` (10+, a digit),
  Google ``AIza`` (exactly 35 more), Hugging Face ``hf_`` (30+), SendGrid ``SG.<id>.<secret>``
  (16+ and 30+). Never inside a longer word.
- ``email``: ``local@domain.tld`` with an alphabetic top-level domain; ``pkg@1.2.3``,
  ``@decorator``, ``user@localhost`` and ``icon@2x.png`` are not addresses.
- ``card_number``: 13 to 19 digits, contiguous or grouped by single spaces or dashes (a
  first group of 4, the others 3 to 6: 4-4-4-4, 4-6-5, 4-3-3-3, 4-4-4-4-3) or by dots in
  groups of 4 (``4111.1111.1111.1111``; other dotted runs are versions or addresses),
  starting with 2 to 9 and passing the Luhn checksum. Luhn refuses 9 in 10 order numbers;
  the first digit refuses epoch timestamps in ms, µs and ns (they start with 1 until 2033)
  and zero-padded ids (no card starts with 0; only airline UATP cards start with 1). Digit
  runs inside words, hex strings, UUIDs or decimal fractions are never looked at; a number
  followed or preceded by more digit groups (an expiry date, a quantity) is found within
  them.

The ``card_number`` regex finds candidate digit runs only; the redactor applies the checks.
"""

_PARTIAL = frozenset({"url_password", "cookie", "secret_assignment"})
"""Patterns whose ``secret`` group is replaced; the rest of the match says what it was."""

_WORD_HINTS: Mapping[str, tuple[bool, tuple[str, ...]]] = {
    "private_key": (False, ("PRIVATE KEY-----",)),
    "jwt": (False, ("eyJ",)),
    "url_password": (False, ("://",)),
    "cookie": (True, ("cookie",)),
    "secret_assignment": (True, ("pass", "pwd", "secret", "token", "apikey", "key")),
}
"""Where the patterns led by words may match: (in any case?, the words); found by ``find``."""

_ANCHORED = frozenset({"cookie", "secret_assignment"})
"""Patterns whose matches start at their hints: tried there, not searched for."""

_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

_MIN_LENGTH = 6
"""The shortest text any built-in pattern can match (``a@b.io``); shorter strings skip."""

_CARD_MARKER = marker("card_number")
_SECRET_MARKER = marker(SECRET_FIELD)


def _hints(name: str, text: str) -> list[int]:
    """Where pattern ``name`` may match in ``text``: cheap, may point wrongly, never misses.

    Empty if it cannot match at all; the regex then runs only on the texts around the hints.
    """
    if name == "email":
        return _found(text, "@")
    if name == "bearer_token":
        if "bearer" not in text.lower():
            return []
        return [match.start() for match in _BEARER_WORD.finditer(text)]
    if name == "api_key":
        return [match.start() for hint in _API_KEY_HINTS for match in hint.finditer(text)]
    if name in _WORD_HINTS:
        any_case, words = _WORD_HINTS[name]
        if any_case:
            lowered = text.lower()
            if len(lowered) != len(text):  # a character that lowers to two: keep positions
                lowered = text.translate(_ASCII_LOWER)
            text = lowered
        return [place for word in words for place in _found(text, word)]
    # A card is 13 digits in a row, or a group of 4 and a group of 3+ after a separator.
    zeros = text.translate(_DIGITS_AS_ZERO)  # keeps positions
    return [
        *_found(zeros, "0000000000000"),
        *_found(zeros, "0000 000"),
        *_found(zeros, "0000-000"),
        *_found(zeros, "0000.0000"),
    ]


def _found(text: str, part: str) -> list[int]:
    """Where ``part`` occurs in ``text``."""
    places: list[int] = []
    place = text.find(part)
    while place >= 0:
        places.append(place)
        place = text.find(part, place + len(part))
    return places


def _apply(names: tuple[str, ...], text: str, counts: dict[str, int]) -> str:
    """``text`` with the built-in patterns ``names`` applied in turn; counts added.

    ``text`` may be many texts joined by NUL: a pattern runs only on those with a hint.
    """
    for name in names:
        if hints := _hints(name, text):
            text = _replace(name, text, hints, counts)
    return text


def _replace(name: str, text: str, hints: list[int], counts: dict[str, int]) -> str:
    pieces: list[str] = []
    done = found = 0
    replacement = marker(name)
    matches = _anchored if name in _ANCHORED else _matches
    for match in matches(PATTERNS[name], text, hints):
        start, end = match.span()
        if name == "card_number":
            run = match.group()
            if _NOT_AFTER_CARD.match(text, end):  # the last group belongs to what follows
                end = start + max(run.rfind(" "), run.rfind("-"), run.rfind("."))
                if end < start:
                    continue
                run = text[start:end]
            replacement, cards = _card_numbers(run)
            if not cards:
                continue
            found += cards - 1
        elif name == "bearer_token":
            start = match.start("token")
        elif name in _PARTIAL:  # the secret goes, what names it stays
            start, end = match.span("secret")
        pieces += (text[done:start], replacement)
        done = end
        found += 1
    if not found:
        return text
    pieces.append(text[done:])
    counts[name] = counts.get(name, 0) + found
    return "".join(pieces)


def _matches(pattern: re.Pattern[str], text: str, hints: list[int]) -> Iterator[re.Match[str]]:
    """``pattern``'s matches in the NUL-separated parts of ``text`` that hold a hint, in order.

    A search bounded to a part sees the text around it as a NUL, which is what a lone text
    would show: no pattern matches a NUL or needs one.
    """
    end = -1
    for hint in sorted(hints):
        if hint < end:
            continue
        start = text.rfind("\x00", 0, hint) + 1
        end = text.find("\x00", hint)
        if end < 0:
            end = len(text)
        yield from pattern.finditer(text, start, end)


def _anchored(pattern: re.Pattern[str], text: str, hints: list[int]) -> Iterator[re.Match[str]]:
    """``pattern``'s matches that start at a hint, in order, none overlapping the one before."""
    end = part_end = 0
    for hint in sorted(set(hints)):
        if hint < end:
            continue
        if hint >= part_end:  # a match never runs into the next text
            part_end = text.find("\x00", hint)
            part_end = len(text) if part_end < 0 else part_end
        match = pattern.match(text, hint, part_end)
        if match is not None:
            end = match.end()
            yield match


def _card_numbers(run: str) -> tuple[str, int]:
    """``run`` (a digit run) with its card numbers replaced, and how many there were.

    The whole run is tried first; when it is no card (say an expiry date or a quantity
    follows or precedes the number) so are its stretches of whole groups, leftmost-longest.
    """
    groups: list[tuple[int, int]] = []
    start = 0
    for index, char in enumerate(run):
        if char in " -.":
            groups.append((start, index))
            start = index + 1
    groups.append((start, len(run)))
    pieces: list[str] = []
    done = found = first = 0
    while first < len(groups):
        last = _card_from(run, groups, first)
        if last < 0:
            first += 1
            continue
        pieces += (run[done : groups[first][0]], _CARD_MARKER)
        done = groups[last][1]
        found += 1
        first = last + 1
    if not found:
        return run, 0
    pieces.append(run[done:])
    return "".join(pieces), found


def _card_from(run: str, groups: list[tuple[int, int]], first: int) -> int:
    """The last group of the longest card number that starts at group ``first``, or -1.

    A card is one group of 13 to 19 digits, or a group of 4 and more groups of 3 to 6 (4-4-4-4,
    4-6-5, 4-3-3-3, 4-4-4-4-3), 13 to 19 digits in all; it starts with 2 to 9 and passes Luhn.
    """
    start, end = groups[first]
    if run[start] in "01":
        return -1
    lasts = [first] if 13 <= end - start <= 19 else []
    if end - start == 4:
        total = 4
        for last in range(first + 1, len(groups)):
            size = groups[last][1] - groups[last][0]
            total += size
            if not 3 <= size <= 6 or total > 19:
                break
            if total >= 13:
                lasts.append(last)
    for last in reversed(lasts):
        if luhn_valid("".join(run[a:b] for a, b in groups[first : last + 1])):
            return last
    return -1


# --- Walking documents ----------------------------------------------------------------------

_Texts = Callable[[list[str], dict[str, int]], list[str] | None]
"""Redacts a document's texts (in walk order): the new texts, or None if none changed."""


def _builtin_texts(names: tuple[str, ...]) -> _Texts:
    def redact(texts: list[str], counts: dict[str, int]) -> list[str] | None:
        # One search per pattern over all the texts at once: NUL separates them, and no
        # pattern matches across it. A text holding NUL itself (which no backend stores
        # anyway) is redacted on its own.
        joined = "\x00".join(texts)
        if joined.count("\x00") != len(texts) - 1:
            return _each(texts, lambda text: _apply(names, text, counts))
        redacted = _apply(names, joined, counts)
        return None if redacted is joined else redacted.split("\x00")

    return redact


def _each(texts: list[str], redact: Callable[[str], str]) -> list[str] | None:
    redacted = [redact(text) for text in texts]
    return None if all(map(str.__eq__, redacted, texts)) else redacted


class _Walker:
    """A redactor: copies the document, replaces secret keys' values, redacts every text.

    Two passes: the copy collects every string (values and keys, in order) long enough to
    hold a secret; they are redacted together, and only if one changed does a second walk
    over the copy put them back. Built by :func:`builtin_redactor` and
    :func:`redactor_from`, whose results need no check.
    """

    __slots__ = ("_key_lengths", "_min_length", "_secret_keys", "_texts")

    def __init__(self, texts: _Texts, secret_keys: frozenset[str], min_length: int) -> None:
        self._texts = texts
        self._secret_keys = frozenset(map(_normalized_key, secret_keys))
        lengths = [len(name) for name in self._secret_keys]
        # Normalizing never lengthens a key; keys of other lengths are not looked at closer.
        self._key_lengths = frozenset(range(min(lengths), 2 * max(lengths) + 1) if lengths else ())
        self._min_length = min_length

    def __call__(self, document: Any) -> Redacted:
        counts: dict[str, int] = {}
        texts: list[str] = []
        copy = self._copy_list([document], texts, counts, 0)
        if texts and (redacted := self._texts(texts, counts)) is not None:
            self._put_list(copy, iter(redacted))
        return Redacted(copy[0], counts)

    def _copy_list(
        self,
        value: list[Any] | tuple[Any, ...],
        texts: list[str],
        counts: dict[str, int],
        depth: int,
    ) -> list[Any]:
        if depth > MAX_DEPTH:
            raise _too_deep()
        out: list[Any] = []
        collect, keep, min_length = texts.append, out.append, self._min_length
        for item in value:
            if isinstance(item, str):
                if len(item) >= min_length:
                    collect(item)
                keep(item)
            elif isinstance(item, dict):
                keep(self._copy_dict(item, texts, counts, depth + 1))
            elif isinstance(item, _SEQUENCES):
                keep(self._copy_list(item, texts, counts, depth + 1))
            elif item is None or isinstance(item, _NUMBERS):
                keep(item)
            else:
                raise _not_json(item)
        return out

    def _copy_dict(
        self, value: dict[Any, Any], texts: list[str], counts: dict[str, int], depth: int
    ) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            raise _too_deep()
        out: dict[str, Any] = {}
        collect, min_length, key_lengths = texts.append, self._min_length, self._key_lengths
        for key, item in value.items():
            if not isinstance(key, str):
                raise _not_json(key, what="key")
            if len(key) >= min_length:
                collect(key)
            if isinstance(item, str):
                if (
                    len(key) in key_lengths
                    and item
                    and self._is_secret_key(key, value)
                    and not _is_marker(item)
                ):
                    counts[SECRET_FIELD] = counts.get(SECRET_FIELD, 0) + 1
                    item = _SECRET_MARKER  # noqa: PLW2901 - the value that is kept
                if len(item) >= min_length:
                    collect(item)
                out[key] = item
            elif isinstance(item, dict):
                out[key] = self._copy_dict(item, texts, counts, depth + 1)
            elif isinstance(item, _SEQUENCES):
                out[key] = self._copy_list(item, texts, counts, depth + 1)
            elif item is None or isinstance(item, _NUMBERS):
                out[key] = item
            else:
                raise _not_json(item)
        return out

    def _is_secret_key(self, key: str, siblings: dict[Any, Any]) -> bool:
        name = _normalized_key(key)
        if name not in self._secret_keys:
            return False
        return name != "token" or "logprob" not in siblings

    def _put_list(self, value: list[Any], redacted: Iterator[str]) -> None:
        """Put the redacted texts back into the copy, in the order they were collected."""
        for index, item in enumerate(value):
            if isinstance(item, str):
                if len(item) >= self._min_length:
                    value[index] = next(redacted)
            elif isinstance(item, dict):
                self._put_dict(item, redacted)
            elif isinstance(item, list):
                self._put_list(item, redacted)

    def _put_dict(self, value: dict[str, Any], redacted: Iterator[str]) -> None:
        entries: list[tuple[str, str, Any]] = []
        renamed = False
        for key, item in value.items():
            new_key = next(redacted) if len(key) >= self._min_length else key
            renamed = renamed or new_key != key
            if isinstance(item, str):
                if len(item) >= self._min_length:
                    item = next(redacted)  # noqa: PLW2901 - the redacted value
            elif isinstance(item, dict):
                self._put_dict(item, redacted)
            elif isinstance(item, list):
                self._put_list(item, redacted)
            entries.append((key, new_key, item))
        if not renamed:
            for key, _, item in entries:
                value[key] = item
            return
        # A key that redacts to a name already present gets a "#2", "#3"… suffix: no entry
        # is lost, and the secret is not told by which one it was.
        out: dict[str, Any] = {}
        for key, new_key, item in entries:
            out[new_key if new_key == key else _unused(new_key, out, value)] = item
        value.clear()
        value.update(out)


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A user pattern's name, as :func:`redactor_from` accepts it."""
_MARKER = re.compile(rf"\[redacted:{_NAME.pattern}\]")
_SEQUENCES = (list, tuple)
_NUMBERS = (int, float)  # bool is an int


def _normalized_key(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "")


def _is_marker(text: str) -> bool:
    return _MARKER.fullmatch(text) is not None


def _unused(key: str, taken: dict[str, Any], original: dict[str, Any]) -> str:
    """``key``, or with the first ``#n`` suffix that names no other entry of the object."""
    candidate, number = key, 1
    while candidate in taken or candidate in original:
        number += 1
        candidate = f"{key}#{number}"
    return candidate


def _not_json(value: object, what: str = "value") -> ValidationError:
    return ValidationError(
        "document", f"is not plain JSON: holds the {what} {value!r:.60} ({type(value).__name__})"
    )


def _too_deep() -> ValidationError:
    return ValidationError("document", f"nests deeper than {MAX_DEPTH} levels (or contains itself)")


def builtin_redactor(
    patterns: Iterable[str] = tuple(PATTERNS), *, secret_keys: Iterable[str] = SECRET_KEYS
) -> Redactor:
    """The built-in redactor with a choice of :data:`PATTERNS` and :data:`SECRET_KEYS`.

    ``builtin_redactor(secret_keys=())`` leaves values under telling keys to the patterns;
    ``builtin_redactor(["api_key", "bearer_token"])`` keeps card numbers and addresses.
    """
    if isinstance(patterns, str):
        raise ValidationError("patterns", "expected a collection of pattern names, got a string")
    chosen = set(patterns)
    if unknown := sorted(map(key_label, chosen - set(PATTERNS))):
        raise ValidationError("patterns", f"unknown built-in {unknown[0]!r}; known: {[*PATTERNS]}")
    keys = _secret_key_names(secret_keys)
    names = tuple(name for name in PATTERNS if name in chosen)
    return _Walker(_builtin_texts(names), keys, _MIN_LENGTH)


def _secret_key_names(keys: Iterable[str]) -> frozenset[str]:
    if isinstance(keys, str):
        raise ValidationError("secret_keys", "expected a collection of key names, got a string")
    names = frozenset(keys)
    for name in names:
        require_text(f"secret_keys.{key_label(name)}", name)
    return names


redact_secrets: Redactor = builtin_redactor()
"""The default redactor: every built-in pattern, and the values under :data:`SECRET_KEYS`.

Secret keys are on by default: a password or an opaque session token matches no pattern, and
the keys that name them rarely name anything else.
"""


class _Rule:
    """One user pattern: every non-empty match becomes the marker of its name."""

    __slots__ = ("name", "pattern", "replacement")

    def __init__(self, name: str, pattern: re.Pattern[str]) -> None:
        self.name = name
        self.pattern = pattern
        self.replacement = marker(name)

    def __call__(self, text: str, counts: dict[str, int]) -> str:
        pieces: list[str] = []
        done = 0
        for match in self.pattern.finditer(text):
            start, end = match.span()
            if start == end:  # a pattern that can match nothing must not insert markers
                continue
            pieces += (text[done:start], self.replacement)
            done = end
        if not pieces:
            return text
        pieces.append(text[done:])
        counts[self.name] = counts.get(self.name, 0) + len(pieces) // 2
        return "".join(pieces)


def redactor_from(
    patterns: Mapping[str, str | re.Pattern[str]], *, secret_keys: Iterable[str] = ()
) -> Redactor:
    """A redactor from a user's own named regexes (and, optionally, telling keys).

    Every non-empty match becomes ``[redacted:<name>]`` and counts under ``name`` (letters,
    digits, ``_ . -``, at most 64 characters); the patterns apply one after another, in the
    mapping's order, to every string and dict key. A string pattern is compiled as given, a
    compiled one keeps its flags. A pattern that matches its own marker text makes the
    redactor count again on every pass; avoid that (``[``, ``]`` and ``:`` help).
    Combine with the defaults: ``chain(redact_secrets, redactor_from({...}))``.
    """
    if not isinstance(patterns, Mapping):
        raise ValidationError("patterns", f"expected a mapping, got {type(patterns).__name__}")
    rules: list[_Rule] = []
    for name, pattern in patterns.items():
        field = f"patterns.{key_label(name)}"
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValidationError(
                field,
                "a name has 1 to 64 letters, digits, '_', '.' or '-', the first a letter or digit",
            )
        rules.append(_Rule(name, _compiled(field, pattern)))
    if not rules:
        raise ValidationError("patterns", "expected at least one pattern")
    return _Walker(_rule_texts(rules), _secret_key_names(secret_keys), 1)


def _rule_texts(rules: list[_Rule]) -> _Texts:
    def redact(texts: list[str], counts: dict[str, int]) -> list[str] | None:
        def each(text: str) -> str:
            for rule in rules:
                text = rule(text, counts)
            return text

        return _each(texts, each)

    return redact


def _compiled(field: str, pattern: object) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        if not isinstance(pattern.pattern, str):
            raise ValidationError(field, "expected a str pattern, got a bytes pattern")
        return pattern
    if not isinstance(pattern, str):
        raise ValidationError(
            field, f"expected a regex (str or re.Pattern), got {type(pattern).__name__}"
        )
    try:
        return re.compile(pattern)
    except re.error as error:
        raise ValidationError(field, f"is not a valid regex: {error}") from None


def chain(*redactors: Redactor) -> Redactor:
    """A redactor that runs ``redactors`` in turn, each on the previous one's output.

    Counts are summed by name. A redactor that is not built here (a user's callable) has its
    result :func:`checked` before the next one sees it (the field is ``chain[<index>]``).
    """
    if not redactors:
        raise ValidationError("redactors", "expected at least one redactor")
    for index, redactor in enumerate(redactors):
        if not callable(redactor):
            raise ValidationError(
                f"redactors[{index}]", f"expected a callable, got {type(redactor).__name__}"
            )

    def chained(document: Any) -> Redacted:
        value = document
        counts: list[Mapping[str, int]] = []
        for index, redactor in enumerate(redactors):
            result = redactor(value)
            if not isinstance(redactor, _Walker | _Chained):
                result = checked(result, where=f"chain[{index}]")
            value = result.value
            counts.append(result.counts)
        return Redacted(value, merge_counts(*counts))

    return _Chained(chained)


class _Chained:
    """A :func:`chain`: its result is checked already, part by part."""

    __slots__ = ("_run",)

    def __init__(self, run: Callable[[Any], Redacted]) -> None:
        self._run = run

    def __call__(self, document: Any) -> Redacted:
        return self._run(document)


def checked(result: object, *, where: str) -> Redacted:
    """A redactor's ``result``, refused unless it is a :class:`Redacted` of plain JSON.

    ``value`` must hold only dicts with str keys, lists (tuples pass, as they encode the
    same), str, int, finite float, bool and None, at most ``MAX_DEPTH`` deep; ``counts`` a
    dict of pattern names (non-empty text) to non-negative ints. Zero counts are dropped.
    Raises :class:`ValidationError` naming ``where`` (the wiring's name for the call, for
    example ``redact`` or ``chain[1]``) and the offending place.
    """
    if not isinstance(result, Redacted):
        raise ValidationError(
            where, f"a redactor must return Redacted(value, counts), got {type(result).__name__}"
        )
    problem = _not_plain_json(result.value, 1)
    if problem is not None:
        path, reason = problem
        raise ValidationError(".".join([f"{where}.value", *reversed(path)]), reason)
    counts = result.counts
    if not isinstance(counts, dict):
        raise ValidationError(
            f"{where}.counts", f"must be a dict of names to counts, got {type(counts).__name__}"
        )
    for name, count in counts.items():
        field = f"{where}.counts.{key_label(name)}"
        require_text(field, name)
        if isinstance(count, bool) or not isinstance(count, int):
            raise ValidationError(field, f"expected an int count, got {type(count).__name__}")
        if count < 0:
            raise ValidationError(field, f"must be >= 0, got {count}")
    if all(counts.values()) and type(counts) is dict:
        return result
    return Redacted(result.value, {name: count for name, count in counts.items() if count})


def _not_plain_json(value: object, depth: int) -> tuple[list[str], str] | None:
    """Where (path, innermost first) and why ``value`` is not plain JSON; None if it is."""
    if not isinstance(value, dict | list | tuple):
        reason = _scalar_problem(value)
        return None if reason is None else ([], reason)
    if depth > MAX_DEPTH:
        return [], f"nests deeper than {MAX_DEPTH} levels (or contains itself)"
    items: Iterable[tuple[object, object]]
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if not isinstance(key, str) and isinstance(value, dict):
            return [], f"the key {key!r:.60} is a {type(key).__name__}; JSON keys are strings"
        problem = _not_plain_json(item, depth + 1)
        if problem is not None:
            problem[0].append(key_label(key) if isinstance(key, str) else str(key))
            return problem
    return None


def _scalar_problem(value: object) -> str | None:
    if value is None or isinstance(value, str | int):  # bool is an int
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a JSON number"
    return f"a {type(value).__name__} is not plain JSON ({value!r:.60})"


def redactor_of(redact: object) -> Redactor | None:
    """What ``actae.open(redact=)`` means: ``True`` the built-in patterns, a callable itself."""
    if redact is None or redact is False:
        return None
    if redact is True:
        return redact_secrets
    if callable(redact):
        return cast(Redactor, redact)
    raise ValidationError(
        "redact", f"expected True, None or a redactor callable, got {type(redact).__name__}"
    )
