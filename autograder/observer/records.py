"""The observer's records of one test process, read in the grader's process.

The library (observer.cpp) writes JSON lines to a pipe whose write end only that process holds;
a thread here reads them as they come, so the writer never blocks, and keeps at most
MAX_RECORDS. The child also runs student code, which could write into that descriptor: a line
that is not one of the library's records is kept as a problem, and what it makes of the rest
is decided by the verdict (autograder/observer/window.py), never by a crash here."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass, field

MAX_LINE = 16 << 10  # a record's names are cut at 2 KB each by the library
MAX_RECORDS = 200_000
KINDS = {
    "hello": ("version", "cupti", "pid", "ts", "ok"),
    "kernel": ("start", "end", "device", "stream", "corr", "grid", "block", "name", "demangled"),
    "memcpy": ("start", "end", "device", "stream", "corr", "bytes", "copy"),
    "memset": ("start", "end", "device", "stream", "corr", "bytes"),
    "launch": ("api", "corr", "outer", "stream_kind", "ts"),
    "flush": ("ts",),
    "dropped": ("n",),
    "error": ("what", "code"),
    "end": (),
}
_TEXT = {"name", "demangled", "api", "what"}
_SHAPES = {"grid", "block"}


def parse(line: bytes) -> dict | str:
    """One record, or why the line is not one."""
    try:
        record = json.loads(line.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return f"a line that is not a record: {line[:80]!r}"
    if not isinstance(record, dict) or record.get("t") not in KINDS:
        return f"a line of no known kind: {line[:80]!r}"
    for key in KINDS[record["t"]]:
        value = record.get(key)
        if key in _TEXT:
            ok = isinstance(value, str)
        elif key in _SHAPES:
            ok = isinstance(value, list) and len(value) == 3 and all(type(v) is int for v in value)
        else:
            ok = type(value) is int and value >= 0
        if not ok:
            return f"a {record['t']} record without a valid {key}: {line[:80]!r}"
    return record


@dataclass
class Records:
    """What one child's observer wrote, in order."""

    records: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # lines that were not records
    truncated: bool = False  # the pipe ended inside a line
    overflow: bool = False  # past MAX_RECORDS: the rest were read and dropped

    @property
    def hello(self) -> dict | None:
        return next((r for r in self.records if r["t"] == "hello"), None)

    def of_kind(self, *kinds: str) -> list[dict]:
        return [r for r in self.records if r["t"] in kinds]

    def add_line(self, line: bytes) -> None:
        found = parse(line)
        if isinstance(found, str):
            self.problems.append(found)
        elif len(self.records) < MAX_RECORDS:
            self.records.append(found)
        else:
            self.overflow = True


class Reader(threading.Thread):
    """Reads a pipe's records until every write end is closed."""

    def __init__(self, read_fd: int):
        super().__init__(daemon=True, name="observer-records")
        self.fd, self.found = read_fd, Records()

    def run(self) -> None:
        pending = b""
        with contextlib.suppress(OSError):
            while chunk := os.read(self.fd, 1 << 16):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self.found.add_line(line)
                if len(pending) > MAX_LINE:
                    self.found.problems.append(f"a line longer than {MAX_LINE} bytes")
                    pending = b""
        self.found.truncated = bool(pending)
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def result(self, timeout: float) -> Records:
        """The records, once the pipe has ended (or after `timeout` s: then marked truncated)."""
        self.join(timeout)
        if self.is_alive():
            self.found.truncated = True
        return self.found


class Pipe:
    """A pipe for one child: its write end goes to the child (`fd`), a Reader takes the other."""

    def __init__(self):
        read_fd, self.fd = os.pipe()  # the child gets the write end through Popen's pass_fds
        self.reader = Reader(read_fd)
        self.reader.start()

    def close_write_end(self) -> None:
        """Once the child holds its copy: the pipe then ends when the child's processes do. Once
        only: the number may name another file afterwards."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
