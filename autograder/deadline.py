"""One time limit for a whole grading, on the grader's own clock: every stage asks it how
long it may still run."""

from __future__ import annotations

import time


class Deadline:
    def __init__(self, seconds: float):
        if not seconds > 0:
            raise ValueError(f"the grading's time limit must be positive, got {seconds}")
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self._end - time.monotonic())

    @property
    def passed(self) -> bool:
        return self.left() <= 0

    def not_run(self) -> str:
        """The verdict of a case the time limit left no room for."""
        return f"not run: the grading's time limit ({self.seconds:.0f} s) ran out"
