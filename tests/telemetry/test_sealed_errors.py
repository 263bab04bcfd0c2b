"""On an encrypted store no log line and no span carries contents (issue 28, item 10).

A step raises an exception whose message holds a secret, after another step returned one.
Every log record the worker makes, in every format it writes (``out=``, the entry points'
JSON and text lines), and every span, status, event and attribute the SDK receives, says the
error's type and where to read it (the run, the cursor), never the message or the result.
Span names carry the agent, never the workflow id, on every store.
"""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import actae
from actae.adapters.logs import ROOT, JsonFormatter, TextFormatter, fields_of
from tests.custody.sealed import keyring_file
from tests.telemetry.recorded import Spans, attributes

SECRET_MESSAGE = "declined-for-hunter2-7f3a9c"  # noqa: S105 - made up
SECRET_RESULT = "result-marmalade-5521"  # noqa: S105 - made up
WORKFLOW_ID = "order-wf-4417"


class DeclinedError(Exception):
    """The provider's error: its message is contents (it quotes what it was sent)."""


@dataclass
class Said:
    """Every log line of the worker's logger, in each form it is written."""

    out: io.StringIO
    json: io.StringIO
    text: io.StringIO
    records: list[logging.LogRecord]

    def everything(self) -> list[str]:
        raw = [f"{r.getMessage()} {fields_of(r)} {r.exc_info}" for r in self.records]
        return [self.out.getvalue(), self.json.getvalue(), self.text.getvalue(), *raw]


class _Kept(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__()
        self.kept = records

    def emit(self, record: logging.LogRecord) -> None:
        self.kept.append(record)


@pytest.fixture
def said() -> Iterator[Said]:
    """The ``actae`` logger's records, as JSON and text lines and as they were made."""
    lines = Said(io.StringIO(), io.StringIO(), io.StringIO(), [])
    json_handler = logging.StreamHandler(lines.json)
    text_handler = logging.StreamHandler(lines.text)
    json_handler.setFormatter(JsonFormatter())
    text_handler.setFormatter(TextFormatter())
    handlers = [json_handler, text_handler, _Kept(lines.records)]
    logger = logging.getLogger(ROOT)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    for handler in handlers:
        logger.addHandler(handler)
    try:
        yield lines
    finally:
        for handler in handlers:
            logger.removeHandler(handler)
        logger.setLevel(level)


def failing(registry: actae.Registry, agent: str) -> None:
    @registry.workflow(agent)
    def pay(ctx: actae.RunContext) -> dict[str, Any]:
        ctx.step("look up", lambda: {"card": SECRET_RESULT})
        ctx.effect("notify", lambda key, token: {"sent": SECRET_RESULT})

        def charge() -> None:
            raise DeclinedError(SECRET_MESSAGE)

        ctx.step("charge", charge)
        return {}


def run_failing(url: str, said: Said, **opened: Any) -> tuple[actae.RunInfo, str]:
    """Start the failing workflow and let a worker fail it; the run, and its agent."""
    registry, agent = actae.Registry(), f"payer-{uuid.uuid4().hex[:8]}"
    failing(registry, agent)
    with actae.open(url, **opened) as store:
        run = store.start_run(WORKFLOW_ID, agent_id=agent, state={})
        worker = actae.Worker(store, name="w1", registry=registry, out=said.out)
        worker.run_once()
        done = store.run(run.run_id)
    assert done.status is actae.RunStatus.FAILED
    return done, agent


def span_texts(spans: Spans) -> list[str]:
    """Every name, status, attribute and event of every span, as text."""
    texts = []
    for span in spans.all():
        texts += [span.name, str(span.status.description), str(attributes(span))]
        texts += [f"{event.name} {dict(event.attributes or {})}" for event in span.events]
    return texts


def test_an_encrypted_store_logs_and_traces_an_error_by_its_type_and_where_to_read_it(
    durable_url: str, tmp_path: Path, spans: Spans, said: Said
) -> None:
    run, agent = run_failing(durable_url, said, keyring=str(keyring_file(tmp_path)))

    assert SECRET_MESSAGE in (run.error or "")  # the run keeps it, sealed under its key
    where = f"DeclinedError (sealed: read run {run.run_id} at cursor {run.cursor})"
    for text in [*said.everything(), *span_texts(spans)]:
        assert SECRET_MESSAGE not in text
        assert SECRET_RESULT not in text
    for form in (said.out, said.json, said.text):
        assert f"run {run.run_id}: failed: {where}" in form.getvalue()
    turn = spans.one("actae.run")
    assert attributes(turn)["actae.run.outcome"] == f"failed: {where}"
    assert turn.status.description == where
    step = spans.one("actae.step charge")
    assert step.status.description == f"DeclinedError (sealed: read run {run.run_id})"
    assert [(e.name, dict(e.attributes or {})) for e in step.events] == [
        ("exception", {"exception.type": f"{__name__}.DeclinedError"})
    ]
    assert not [span.name for span in spans.all() if WORKFLOW_ID in span.name]
    assert spans.named(f"actae.start {agent}")


def test_a_clear_store_still_says_the_message_but_never_names_a_span_by_workflow_id(
    durable_url: str, spans: Spans, said: Said
) -> None:
    run, agent = run_failing(durable_url, said)

    assert f"run {run.run_id}: failed: DeclinedError: {SECRET_MESSAGE}" in said.out.getvalue()
    turn = spans.one("actae.run")
    assert attributes(turn)["actae.run.outcome"] == f"failed: DeclinedError: {SECRET_MESSAGE}"
    step = spans.one("actae.step charge")
    (event,) = step.events
    assert (event.attributes or {})["exception.message"] == SECRET_MESSAGE
    assert not [span.name for span in spans.all() if WORKFLOW_ID in span.name]
    assert spans.named(f"actae.start {agent}")


def unrecordable(ctx: actae.RunContext) -> None:
    """A step whose result is no JSON: the refusal quotes the value it could not store."""
    ctx.step("look up", lambda: {"cards": {SECRET_RESULT}})


def refused_by_actae(ctx: actae.RunContext) -> None:
    """An error of Actae's own kind, not one the worker explains: its message is said."""
    raise actae.ActaeError(f"upstream refused {SECRET_MESSAGE}")


@pytest.mark.parametrize(
    ("code", "line"),
    [
        (unrecordable, "failed: ValidationError (sealed: read run"),
        (refused_by_actae, "not advanced: ActaeError (sealed: read run"),
    ],
)
def test_every_way_a_run_stops_is_said_without_its_message_on_an_encrypted_store(
    durable_url: str, tmp_path: Path, spans: Spans, said: Said, code: Any, line: str
) -> None:
    registry, agent = actae.Registry(), f"payer-{uuid.uuid4().hex[:8]}"
    registry.workflow(agent)(code)
    with actae.open(durable_url, keyring=str(keyring_file(tmp_path))) as store:
        run = store.start_run(WORKFLOW_ID, agent_id=agent, state={})
        actae.Worker(store, name="w1", registry=registry, out=said.out).run_once()

    for text in [*said.everything(), *span_texts(spans)]:
        assert SECRET_MESSAGE not in text
        assert SECRET_RESULT not in text
    assert f"run {run.run_id}: {line}" in said.out.getvalue()
