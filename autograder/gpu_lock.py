"""One GPU shared by the gradings of a batch: many test processes at once, or one timing.

Correctness runs take the lock shared; a perf run takes it alone, so nothing else of the
batch runs on the GPU while it times. Two files make it fair (flock alone lets a stream of
shared holders starve a timer): a waiting timer holds the turnstile, which every newcomer
passes through first, so runs that arrive after it wait until it is done.

The runner takes it once a test process is warm (torch imported, the CUDA context made) and
only then lets it load the module (autograder/runner.py): starting a process needs no lock,
and no student code runs on the GPU without it.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable

POLL_SECONDS = 0.02


class Held:
    """A lock taken: release() gives it back (closing the files does)."""

    def __init__(self, handles: list[int]):
        self._handles = handles

    def release(self) -> None:
        for handle in self._handles:
            os.close(handle)
        self._handles = []


class GpuLock:
    """The lock of one GPU: files PATH.turnstile and PATH.lock, made on first use."""

    def __init__(self, path: str):
        self.path = path
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def _open(self, suffix: str) -> int:
        return os.open(f"{self.path}.{suffix}", os.O_RDWR | os.O_CREAT, 0o600)

    def acquire(self, alone: bool, given_up: Callable[[], bool]) -> Held | None:
        """Take the lock (alone: no one else holds it), waiting until taken or until
        given_up() says stop (then None)."""
        turnstile, lock = self._open("turnstile"), self._open("lock")
        try:
            if not _take(turnstile, fcntl.LOCK_EX, given_up):
                raise _GaveUp
            if not alone:
                fcntl.flock(turnstile, fcntl.LOCK_UN)  # passed through: a timer that comes later may wait here
            if not _take(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH, given_up):
                raise _GaveUp
        except _GaveUp:
            os.close(turnstile)
            os.close(lock)
            return None
        if alone:
            return Held([lock, turnstile])  # the turnstile is held until the timing ends
        os.close(turnstile)
        return Held([lock])


class _GaveUp(Exception):
    pass


def _take(handle: int, how: int, given_up: Callable[[], bool]) -> bool:
    while True:
        try:
            fcntl.flock(handle, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if given_up():
                return False
            time.sleep(POLL_SECONDS)
