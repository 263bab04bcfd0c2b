"""Reading a child process's output line by line, with a deadline instead of a hang."""

from __future__ import annotations

import queue
import threading
from typing import IO


class Lines:
    """The lines of ``stream``, read in a thread; ``next(seconds)`` waits at most that long."""

    def __init__(self, stream: IO[str]) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put("")  # the end of the output, as readline() says it

    def next(self, seconds: float) -> str:
        """The next line ('' at the end), or AssertionError after ``seconds``."""
        try:
            return self._lines.get(timeout=seconds)
        except queue.Empty:
            raise AssertionError(f"no output line within {seconds} s") from None

    def rest(self, seconds: float) -> str:
        """Everything up to the end of the output (the process has exited)."""
        collected = []
        while line := self.next(seconds):
            collected.append(line)
        return "".join(collected)
