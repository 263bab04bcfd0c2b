"""How the command prints: JSON for scripts, rich tables for people.

JSON is the same for every backend (ids, times and documents as JSON values), so scripts
can pipe it into ``jq``. Tables go to a terminal at its width; piped, they are as wide as
their content (up to 200 columns), so nothing is cut off mid-id.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import orjson
from pydantic import BaseModel
from rich.console import Console

PIPED_WIDTH = 200
"""Columns a table may take when stdout is not a terminal."""


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(type(value).__name__)


def print_json(value: Any) -> None:
    """``value`` (dataclasses, models, lists and dicts of them) as indented JSON on stdout."""
    sys.stdout.write(orjson.dumps(value, default=_default, option=orjson.OPT_INDENT_2).decode())
    sys.stdout.write("\n")


def console() -> Console:
    """A rich console on stdout: colours on a terminal, plain text when piped.

    Run data (workflow ids, notes, errors) is printed as it is: rich's markup and emoji codes
    are off, so ``[bold]`` or ``:rocket:`` in a note is text, never styling or an error.
    """
    piped = not sys.stdout.isatty()
    return Console(
        width=PIPED_WIDTH if piped else None,
        highlight=False,
        soft_wrap=False,
        markup=False,
        emoji=False,
    )
