"""One observed case's GPU work, cut out of its child's records.

The harness brackets a case's calls with two copies of sizes the grader drew for it (markers:
a host-to-device copy of that many bytes, issued after the device is idle). The calls' work is
what the GPU ran between the first marker's end and the second's start, and the launches the
host made in that span. Student code may copy such sizes too, but it cannot remove a copy the
observer saw: a case whose markers are not each seen exactly once is not delimited, and fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from autograder.observer.records import Records
from course.harness import covered

HOST_TO_DEVICE = 1  # CUPTI_ACTIVITY_MEMCPY_KIND_HTOD
EXPLICIT, LEGACY, PER_THREAD, UNKNOWN = 0, 1, 2, 3
STREAM_NAMES = {EXPLICIT: "a stream", LEGACY: "the legacy default stream", PER_THREAD: "the per-thread default stream"}


@dataclass(frozen=True)
class Kernel:
    name: str  # mangled, as the module names it
    demangled: str
    start: int  # ns
    end: int
    stream: int  # CUPTI's stream id
    stream_kind: int  # of the launch that made it: EXPLICIT, LEGACY, PER_THREAD, UNKNOWN
    grid: tuple[int, int, int]
    block: tuple[int, int, int]

    @property
    def ms(self) -> float:
        return (self.end - self.start) / 1e6


@dataclass(frozen=True)
class Observation:
    """A case's calls as the GPU ran them."""

    calls: int
    kernels: tuple[Kernel, ...]
    transfers: tuple[dict, ...]  # memcpy and memset records
    busy_ns: int  # the union of every kernel's, copy's and fill's interval
    unmatched_launches: int  # launches the host made that no kernel record answers

    @property
    def busy_ms_per_call(self) -> float:
        return self.busy_ns / 1e6 / self.calls


def _marker(records: Records, size: int) -> dict | str:
    found = [r for r in records.of_kind("memcpy") if r["bytes"] == size and r["copy"] == HOST_TO_DEVICE]
    if len(found) != 1:
        return f"its marker copy of {size} bytes was seen {len(found)} times, not once"
    return found[0]


def _flushed_after(records: Records, marker: dict) -> bool:
    """Whether a flush (or the end) followed the marker in the pipe: every record of the span
    before it had reached the pipe."""
    position = next(i for i, r in enumerate(records.records) if r is marker)
    return any(r["t"] in ("flush", "end") for r in records.records[position + 1 :])


def _groups(launches: list[dict]) -> dict[int, list[dict]]:
    """Launches by the outermost runtime launch they were made in (or their own id): one
    kernel's launch as the runtime and the driver each saw it."""
    groups: dict[int, list[dict]] = {}
    for launch in launches:
        groups.setdefault(launch["outer"] or launch["corr"], []).append(launch)
    return groups


def _stream_kinds(launches: list[dict]) -> dict[int, int]:
    """{correlation id a kernel record may carry: the stream its launch named}: a default
    stream where any call of the group named one, else a stream where one named it."""
    kinds: dict[int, int] = {}
    for key, group in _groups(launches).items():
        named = {launch["stream_kind"] for launch in group}
        kind = next((k for k in (LEGACY, PER_THREAD, EXPLICIT) if k in named), UNKNOWN)
        kinds.update({launch["corr"]: kind for launch in group})
        kinds[key] = kind
    return kinds


def _unanswered(launches: list[dict], answered: set[int]) -> int:
    """How many launches (a runtime launch with the driver launches inside it counting once)
    no kernel record of the span answers: records lost to the observer."""
    return sum(1 for key, group in _groups(launches).items() if not ({key} | {g["corr"] for g in group}) & answered)


def _kernel(record: dict, kinds: dict[int, int]) -> Kernel:
    return Kernel(
        record["name"],
        record["demangled"],
        record["start"],
        record["end"],
        record["stream"],
        kinds.get(record["corr"], UNKNOWN),
        tuple(record["grid"]),
        tuple(record["block"]),
    )


def observe(records: Records, markers: tuple[int, int], calls: int) -> Observation | str:
    """The case's Observation, or why its span cannot be told."""
    if records.problems:
        return f"the observer's pipe held {len(records.problems)} line(s) it did not write: {records.problems[0]}"
    if records.overflow:
        return "the observed run made more GPU work than the observer keeps"
    if records.of_kind("dropped"):
        return "CUPTI dropped records of the observed run"
    first, last = (_marker(records, size) for size in markers)
    for marker in (first, last):
        if isinstance(marker, str):
            return marker
    if not first["end"] <= last["start"] or not _flushed_after(records, last):
        return "its markers were out of order, or the records after them never arrived"
    low, high = first["end"], last["start"]
    inside = [r for r in records.of_kind("kernel", "memcpy", "memset") if low <= r["start"] < high]
    launches = [r for r in records.of_kind("launch") if low <= r["ts"] < high]
    kinds = _stream_kinds(launches)
    kernels = tuple(_kernel(r, kinds) for r in inside if r["t"] == "kernel")
    unmatched = _unanswered(launches, {r["corr"] for r in inside if r["t"] == "kernel"})
    busy = covered([(r["start"], r["end"]) for r in inside])
    transfers = tuple(r for r in inside if r["t"] != "kernel")
    return Observation(calls, kernels, transfers, int(busy), unmatched)
