"""Contract: input limits hold exactly where they are documented (every backend).

``test_bad_input.py`` shows that far-off values are refused; these pin the boundary itself,
so a limit that drifts by one, or a blank string that passes for a name, is caught.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import actae
from actae.domain.validation import MAX_TEXT_LENGTH


def test_text_is_accepted_up_to_its_limit_and_refused_one_past_it(store: actae.Store) -> None:
    run = store.start_run("wf", agent_id="a", state={})
    at_limit = "k" * MAX_TEXT_LENGTH

    receipt = store.record(
        run.channel_id, kind=at_limit, payload={}, expected_cursor=1, operation_id=at_limit
    )
    for field in ("kind", "operation_id"):
        over: dict[str, Any] = {"kind": "k", "operation_id": "op", field: at_limit + "k"}
        with pytest.raises(actae.ValidationError) as caught:
            store.record(run.channel_id, payload={}, expected_cursor=2, **over)
        assert caught.value.field == field
        assert f"the limit is {MAX_TEXT_LENGTH}" in caught.value.reason

    assert receipt.cursor == store.head(run.channel_id).cursor == 2


@pytest.mark.parametrize("blank", [" ", "\t\n", "   "])
def test_blank_names_are_as_empty_as_empty_ones(store: actae.Store, blank: str) -> None:
    run = store.start_run("wf", agent_id="a", state={})

    cases: list[tuple[str, Callable[[], object]]] = [
        ("workflow_id", lambda: store.start_run(blank, agent_id="a", state={})),
        ("kind", lambda: store.record(run.channel_id, kind=blank, payload={}, expected_cursor=1)),
        (
            "operation_id",
            lambda: store.record(
                run.channel_id, kind="k", payload={}, expected_cursor=1, operation_id=blank
            ),
        ),
    ]
    for field, call in cases:
        with pytest.raises(actae.ValidationError) as caught:
            call()
        assert (caught.value.field, caught.value.reason) == (field, "must not be empty")

    assert store.head(run.channel_id).cursor == 1


LIMIT = 64
ENVELOPE = len('{"b":""}')  # the canonical bytes around the padding


def test_documents_are_accepted_up_to_the_configured_size_and_refused_past_it(
    store_url: str,
) -> None:
    with actae.open(store_url, max_document_bytes=LIMIT) as store:
        run = store.start_run("wf", agent_id="a", state={})
        exact = {"b": "x" * (LIMIT - ENVELOPE)}
        one_over = {"b": "x" * (LIMIT - ENVELOPE + 1)}

        store.record(run.channel_id, kind="k", payload=exact, expected_cursor=1)
        with pytest.raises(actae.ValidationError) as caught:
            store.record(run.channel_id, kind="k", payload=one_over, expected_cursor=2)

        assert caught.value.field == "payload"
        assert caught.value.reason == f"encodes to {LIMIT + 1} bytes, the limit is {LIMIT} bytes"
        assert store.head(run.channel_id).cursor == 2
