"""eventsourcing's own recorder test cases, run against Actae's SQLite recorder.

``ActaeSQLiteRecorder`` implements eventsourcing's ``ApplicationRecorder`` interface with
statements of its own (the operation id column, the forgotten-key and predecessor guards in
the write transaction) and overrides only the interface's public methods, so the library's
contract for any application recorder must still hold: insert and select, notifications in
order, concurrent writers without conflicts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from eventsourcing.sqlite import SQLiteDatastore
from eventsourcing.tests.persistence import ApplicationRecorderTestCase

from actae.adapters.persistence.offloaded import ActaeSQLiteRecorder
from tests.helpers import private_overrides


class TestApplicationRecorderContract(ApplicationRecorderTestCase):
    """The library's application-recorder cases, each on a fresh SQLite file."""

    folder: Path

    @pytest.fixture(autouse=True)
    def _folder(self, tmp_path: Path) -> None:
        self.folder = tmp_path

    def create_recorder(self) -> ActaeSQLiteRecorder:
        path = self.folder / f"recorder-{len(list(self.folder.iterdir()))}.db"
        recorder = ActaeSQLiteRecorder(SQLiteDatastore(str(path)))
        recorder.create_table()
        return recorder


def test_no_private_method_of_eventsourcing_is_overridden() -> None:
    from eventsourcing.sqlite import SQLiteApplicationRecorder

    assert private_overrides(ActaeSQLiteRecorder, SQLiteApplicationRecorder) == []
