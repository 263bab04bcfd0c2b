"""The built-in redactors: walk a JSON document, clean its texts, count what left it.

Every string is scanned, **dict keys included** (a secret in a key is stored forever too),
and a whole string under a telling key (:data:`~.patterns.SECRET_KEYS`) is replaced. The
document is copied once; its strings are joined and scanned together, and put back only
when something was redacted (docs/performance.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, cast

from actae.adapters.redaction.patterns import (
    MIN_LENGTH,
    PATTERNS,
    SECRET_FIELD,
    SECRET_KEYS,
    marker,
    redacted_text,
)
from actae.domain.errors import ValidationError
from actae.domain.redaction import PlainRedactor, Redacted, Redactor, in_turn
from actae.domain.validation import MAX_DEPTH, key_label, require_text

_SECRET_MARKER = marker(SECRET_FIELD)

_Texts = Callable[[list[str], dict[str, int]], list[str] | None]  # None: none changed


def _builtin_texts(names: tuple[str, ...]) -> _Texts:
    def redact(texts: list[str], counts: dict[str, int]) -> list[str] | None:
        # One search per pattern over all the texts at once: NUL separates them, and no
        # pattern matches across it. A text holding NUL itself (which no backend stores
        # anyway) is redacted on its own.
        joined = "\x00".join(texts)
        if joined.count("\x00") != len(texts) - 1:
            return _each(texts, lambda text: redacted_text(names, text, counts))
        redacted = redacted_text(names, joined, counts)
        return None if redacted is joined else redacted.split("\x00")

    return redact


def _each(texts: list[str], redact: Callable[[str], str]) -> list[str] | None:
    redacted = [redact(text) for text in texts]
    return None if all(map(str.__eq__, redacted, texts)) else redacted


class _Walker(PlainRedactor):
    """A redactor: copies the document collecting its texts, redacts them at once, puts back."""

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
        copy = self._copy([document], texts, counts, 0)
        if texts and (redacted := self._texts(texts, counts)) is not None:
            self._put(copy, iter(redacted))
        return Redacted(copy[0], counts)

    def _copy(self, value: Any, texts: list[str], counts: dict[str, int], depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise _too_deep()
        collect, min_length, key_lengths = texts.append, self._min_length, self._key_lengths
        is_dict = isinstance(value, dict)
        out: Any = {} if is_dict else [None] * len(value)
        for key, item in value.items() if is_dict else enumerate(value):
            if is_dict:
                if not isinstance(key, str):
                    raise _not_json(key, what="key")
                if len(key) >= min_length:
                    collect(key)
                if (
                    isinstance(item, str)
                    and len(key) in key_lengths
                    and item
                    and self._is_secret_key(key, value)
                    and not _is_marker(item)
                ):
                    counts[SECRET_FIELD] = counts.get(SECRET_FIELD, 0) + 1
                    item = _SECRET_MARKER  # noqa: PLW2901 - the value that is kept
            if isinstance(item, str):
                if len(item) >= min_length:
                    collect(item)
            elif isinstance(item, _CONTAINERS):
                item = self._copy(item, texts, counts, depth + 1)  # noqa: PLW2901 - its copy
            elif item is not None and not isinstance(item, _NUMBERS):
                raise _not_json(item)
            out[key] = item
        return out

    def _is_secret_key(self, key: str, siblings: dict[Any, Any]) -> bool:
        name = _normalized_key(key)
        if name not in self._secret_keys:
            return False
        return name != "token" or "logprob" not in siblings

    def _put(self, value: Any, redacted: Iterator[str]) -> None:
        min_length = self._min_length
        is_dict = isinstance(value, dict)
        renamed: dict[str, str] = {}
        key: Any
        for key, item in value.items() if is_dict else enumerate(value):
            if is_dict and len(key) >= min_length and (new_key := next(redacted)) != key:
                renamed[key] = new_key
            if isinstance(item, str):
                if len(item) >= min_length:
                    value[key] = next(redacted)
            elif isinstance(item, dict | list):
                self._put(item, redacted)
        if renamed:
            # A key that redacts to a name already present gets a "#2", "#3"… suffix: no
            # entry is lost, and the secret is not told by which one it was.
            out: dict[str, Any] = {}
            for key, item in value.items():
                out[_unused(renamed[key], out, value) if key in renamed else key] = item
            value.clear()
            value.update(out)


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a user pattern's name
_MARKER = re.compile(rf"\[redacted:{_NAME.pattern}\]")
_CONTAINERS = (dict, list, tuple)
_NUMBERS = (int, float)  # bool is an int


def _normalized_key(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "")


def _is_marker(text: str) -> bool:
    return _MARKER.fullmatch(text) is not None


def _unused(key: str, taken: dict[str, Any], original: dict[str, Any]) -> str:
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
    """The built-in redactor with a choice of :data:`PATTERNS` and :data:`SECRET_KEYS`."""
    if isinstance(patterns, str):
        raise ValidationError("patterns", "expected a collection of pattern names, got a string")
    chosen = set(patterns)
    if unknown := sorted(map(key_label, chosen - set(PATTERNS))):
        raise ValidationError("patterns", f"unknown built-in {unknown[0]!r}; known: {[*PATTERNS]}")
    keys = _secret_key_names(secret_keys)
    names = tuple(name for name in PATTERNS if name in chosen)
    return _Walker(_builtin_texts(names), keys, MIN_LENGTH)


def _secret_key_names(keys: Iterable[str]) -> frozenset[str]:
    if isinstance(keys, str):
        raise ValidationError("secret_keys", "expected a collection of key names, got a string")
    names = frozenset(keys)
    for name in names:
        require_text(f"secret_keys.{key_label(name)}", name)
    return names


redact_secrets: Redactor = builtin_redactor()
"""The default redactor: every built-in pattern, and the values under :data:`SECRET_KEYS`."""


_Rule = Callable[[str, dict[str, int]], str]  # a user pattern: each non-empty match a marker


def _rule(name: str, pattern: re.Pattern[str]) -> _Rule:
    replacement = marker(name)

    def apply(text: str, counts: dict[str, int]) -> str:
        pieces: list[str] = []
        done = 0
        for match in pattern.finditer(text):
            start, end = match.span()
            if start == end:  # a pattern that can match nothing must not insert markers
                continue
            pieces += (text[done:start], replacement)
            done = end
        if not pieces:
            return text
        pieces.append(text[done:])
        counts[name] = counts.get(name, 0) + len(pieces) // 2
        return "".join(pieces)

    return apply


def redactor_from(
    patterns: Mapping[str, str | re.Pattern[str]], *, secret_keys: Iterable[str] = ()
) -> Redactor:
    """A redactor from a user's own named regexes (and, optionally, telling keys).

    Every non-empty match becomes ``[redacted:<name>]``, pattern after pattern in the
    mapping's order; one that matches its own marker counts again on every pass.
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
        rules.append(_rule(name, _compiled(field, pattern)))
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
    """A redactor that runs ``redactors`` in turn, each on the previous one's output."""
    if not redactors:
        raise ValidationError("redactors", "expected at least one redactor")
    for index, redactor in enumerate(redactors):
        if not callable(redactor):
            raise ValidationError(
                f"redactors[{index}]", f"expected a callable, got {type(redactor).__name__}"
            )

    return _Chained(redactors)


class _Chained(PlainRedactor):
    """A :func:`chain`: its result is checked already, part by part."""

    __slots__ = ("_redactors",)

    def __init__(self, redactors: tuple[Redactor, ...]) -> None:
        self._redactors = redactors

    def __call__(self, document: Any) -> Redacted:
        return in_turn(self._redactors, document, where="chain")


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
