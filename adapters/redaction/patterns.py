"""The built-in secret patterns, and how they scan a text cheaply.

Each kind has a regex and cheap hints of where it may match, so a clean text costs a few
``str.find`` calls and no regex. ``[redacted:<name>]`` matches no pattern: it is idempotent.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator, Mapping

SECRET_FIELD = "secret_field"  # noqa: S105 - the count of values replaced for their key

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
"""Keys whose string value is a secret whatever it looks like, matched ignoring case, ``-``
and ``_`` (``API-Key``, ``apiKey``; not ``max_tokens``). A ``token`` beside a ``logprob`` key
is a model's output token (chat APIs' log-probabilities), not a credential, and is kept.
"""


def marker(name: str) -> str:
    """The text that stands in for a redacted secret: ``[redacted:<name>]``."""
    return f"[redacted:{name}]"


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


# Lower length bounds keep short look-alikes out; there are no upper bounds and the quantifiers
# are possessive, so a match takes the whole token and never leaves a tail of the secret
# behind. No match starts in the middle of a word or a token (a lookbehind), which also keeps
# the searches linear: a failed attempt never scans a run that a later attempt scans again.

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
"""The built-in patterns by name, in the order they apply; the comment above each regex says
what it finds and what it leaves (docs/data.md lists them). The ``card_number`` regex finds
candidate digit runs only: grouping, a first digit of 2 to 9 and Luhn are checked after it.
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

MIN_LENGTH = 6  # the shortest text any built-in pattern can match (a@b.io); shorter strings skip

_CARD_MARKER = marker("card_number")


def _hints(name: str, text: str) -> list[int]:
    # Where pattern name may match in text: cheap, may point wrongly, never misses (empty:
    # it cannot match); the regex then runs only on the texts around the hints.
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
    places: list[int] = []
    place = text.find(part)
    while place >= 0:
        places.append(place)
        place = text.find(part, place + len(part))
    return places


def redacted_text(names: tuple[str, ...], text: str, counts: dict[str, int]) -> str:
    """``text`` (NUL-joined texts) with the built-in patterns ``names`` applied; counts added."""
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
    # pattern's matches in the NUL-separated parts of text that hold a hint, in order (a
    # search bounded to a part sees a NUL around it, as a lone text would).
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
    # run (a digit run) with its card numbers replaced, and how many: the whole run first,
    # else its stretches of whole groups, leftmost-longest (a date or quantity may adjoin).
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
    # The last group of the longest card that starts at group first, or -1: one group of 13
    # to 19 digits, or a group of 4 and groups of 3 to 6 (13 to 19 digits), 2-9 first, Luhn.
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
