"""What redaction costs on a typical document, and whether detect-secrets could be its engine.

A 2 KB tool output (a web search's JSON: headers, six results with titles, URLs and
snippets), clean and with an API key and an e-mail address in one snippet, is redacted by
the built-in ``redact_secrets`` and, when ``detect-secrets`` is installed
(``pip install detect-secrets``), by its default plugins run on every text of the document
(each string on its own, and all of them joined into one scan). ``copy.deepcopy`` is the
floor: a redactor returns a new document. The engines take turns (this VM's speed drifts);
the figures are medians of the turns, in µs per document.

Detection: the secrets and near misses of ``tests/unit/test_redaction*.py``, counted as
found (any finding) by each engine.

Run with ``python -m benchmarks.redaction``; results go to
``benchmarks/results/redaction.json``.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

from actae.redaction import redact_secrets
from benchmarks.common import save, stamp
from tests.unit import test_redaction as cases
from tests.unit import test_redaction_patterns as more

SECRETS = [
    *(cases.OPENAI, cases.ANTHROPIC, cases.AWS, cases.GITHUB, cases.GITHUB_FINE, cases.SLACK),
    *(cases.GOOGLE, cases.STRIPE, cases.STRIPE_TEST, cases.VISA, cases.AMEX, more.HF),
    *(more.SENDGRID, more.JWT, more.PEM, more.OPENSSH, "jane.doe@example.com"),
    "Authorization: Bearer abc123def456ghi789",
    "postgresql://app:s3cret@db.internal/prod",
    "passwd=hunter2",
    "Cookie: session=9f8e7d6c; theme=dark",
]
NEAR_MISSES = [
    *(cases.GIT_SHA, cases.UUID, cases.ISO_TIMESTAMP, "the bearer of bad news"),
    "sk-learn-compatible-estimators-and-pipelines-guide",
    "password: required, at least 12 characters",
    "max_tokens=1024 token_count=7",
    "https://example.com:8443/path?q=1",
    "192.168.100.200",
    "pk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
]


def tool_output(with_secrets: bool) -> dict[str, Any]:
    """A web search's JSON result, about 2 KB."""
    snippet = (
        "Event sourcing keeps every step of an agent run, so a crashed worker resumes where "
        "it stopped instead of sampling the model again. Version 2.4.1 adds leases."
    )
    results = [
        {"title": f"Result {i}", "url": f"https://example.com/a/{i}?ref=s", "snippet": snippet}
        for i in range(6)
    ]
    if with_secrets:
        results[2]["snippet"] += f" Mail jane.doe@example.com, key {cases.OPENAI}."
    return {
        "tool": "web_search",
        "status": 200,
        "elapsed_ms": 412.5,
        "headers": {"content-type": "application/json", "x-request-id": cases.UUID},
        "results": results,
        "usage": {"input_tokens": 700, "output_tokens": 112},
    }


def texts_of(value: Any) -> list[str]:
    """Every string of a JSON document, dict keys included, in walk order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in (key, *texts_of(item))]
    if isinstance(value, list):
        return [text for item in value for text in texts_of(item)]
    return []


_KEPT: list[object] = []


def detect_secrets_engines() -> dict[str, Callable[[Any], object]]:
    """detect-secrets' default plugins over a document's texts, if it is installed."""
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:
        return {}
    settings = default_settings()  # its plugins and filters live in global settings
    settings.__enter__()
    _KEPT.append(settings)  # left open for the run: closing it empties the settings

    def each(document: Any) -> object:
        return copy.deepcopy(document), [s for t in texts_of(document) for s in scan_line(t)]

    def joined(document: Any) -> object:
        return copy.deepcopy(document), list(scan_line("\n".join(texts_of(document))))

    return {"detect-secrets, each text": each, "detect-secrets, one scan": joined}


def timings(engines: dict[str, Callable[[Any], object]], turns: int) -> dict[str, float]:
    """Median µs per document of each engine on each document, the engines taking turns."""
    documents = {"clean": tool_output(False), "secrets": tool_output(True)}
    seen: dict[str, list[float]] = {}
    for _ in range(turns):
        for name, engine in engines.items():
            for kind, document in documents.items():
                count = 200 if name in ("built-in", "copy.deepcopy") else 5
                start = time.perf_counter()
                for _ in range(count):
                    engine(document)
                elapsed = (time.perf_counter() - start) / count * 1e6
                seen.setdefault(f"{name} ({kind})", []).append(elapsed)
    return {name: round(statistics.median(each), 1) for name, each in seen.items()}


def main() -> None:
    """Print and save the timings and the detection counts."""
    engines: dict[str, Callable[[Any], object]] = {
        "built-in": redact_secrets,
        "copy.deepcopy": copy.deepcopy,
        **detect_secrets_engines(),
    }
    results: dict[str, Any] = {**stamp(), "µs per document": timings(engines, turns=11)}
    found: dict[str, dict[str, int]] = {}
    for name, engine in engines.items():
        if name != "copy.deepcopy":
            hits = [bool(_findings(engine, text)) for text in SECRETS]
            misses = [bool(_findings(engine, text)) for text in NEAR_MISSES]
            found[name] = {"secrets found": sum(hits), "near misses flagged": sum(misses)}
    results["detection"] = {"secrets": len(SECRETS), "near misses": len(NEAR_MISSES), **found}
    for key, value in results.items():
        print(f"{key}: {value}")
    save("redaction", results)
    for settings in _KEPT:
        settings.__exit__(None, None, None)  # type: ignore[attr-defined]


def _findings(engine: Callable[[Any], object], text: str) -> object:
    result = engine(text)
    return getattr(result, "counts", None) or (result[1] if isinstance(result, tuple) else None)


if __name__ == "__main__":
    main()
