"""A perf group's cases run once more, in a test process of their own under the observer: the
profiled call of each (autograder/timed_kernels.py, observed_run), between two marker copies.
What the GPU ran there comes back through the observer's pipe, never through that process's
files; its outputs come back as any result does, to be judged right.

A process of its own, not the perf child: the observer costs each launch some host time, and
the perf child's timed calls must run as the baseline's do, unobserved; and records of that
child would hold the timer's own kernels (L2 flushes, sleeps) besides the op's."""

from __future__ import annotations

import functools
import os
import secrets
import shutil
from dataclasses import dataclass

from autograder.observer.build import LIBRARY, ObserverUnavailable, library
from autograder.observer.records import Pipe, Records
from autograder.observer.window import Observation, observe
from autograder.runner import GroupRunner
from autograder.timed_kernels import OBSERVED_CALLS
from course.cases import Case

READ_TIMEOUT = 10  # seconds for the pipe to end once the child's processes are killed


@dataclass(frozen=True)
class Observed:
    """One perf case's observed run."""

    outcome: dict | str  # the child's raw result (the calls' outputs), or why there is none
    observation: Observation | None = None
    problem: str = ""  # why its observation fails the case
    unavailable: str = ""  # why there is none, through no doing of the submission's


class Watch:
    """The observer attached to one child: the library copied into the child's new folder (a
    copy no earlier process of the submission could touch), and a pipe."""

    def __init__(self, built: str, folder: str):
        place = os.path.join(folder, "observer")
        os.makedirs(place)
        self.library = os.path.join(place, LIBRARY)
        shutil.copyfile(built, self.library)
        os.chmod(self.library, 0o555)
        self.pipe = Pipe()
        self.env = {"CUDA_INJECTION64_PATH": self.library, "COURSE_OBSERVER_FD": str(self.pipe.fd)}
        self.fds = (self.pipe.fd,)

    def started(self) -> None:
        self.pipe.close_write_end()

    def finish(self) -> Records:
        self.pipe.close_write_end()
        return self.pipe.reader.result(READ_TIMEOUT)


class Observer:
    """A grading's observer: the library, built (or found cached) at its first use."""

    def __init__(self, env: dict):
        self.env = env

    @functools.cached_property
    def built(self) -> str:
        """The library's path, or '' (see `unavailable`)."""
        try:
            return library(self.env)
        except (ObserverUnavailable, OSError) as error:
            self._why = str(error)
            return ""

    @property
    def unavailable(self) -> str:
        return "" if self.built else f"no observer on this machine: {self._why}"

    def attach(self, folder: str) -> Watch:
        return Watch(self.built, folder)


def markers_for(cases: list[tuple[int, Case]]) -> dict[int, tuple[int, int]]:
    """Two copy sizes per case, drawn for this run: odd, apart from each other, near a MB."""
    base = 1_000_001 + 2 * secrets.randbelow(1 << 18)
    return {index: (base + 4 * n, base + 4 * n + 2) for n, (index, _) in enumerate(cases)}


def observed_case(outcome: dict | str, children: list[Records], markers: tuple[int, int]) -> Observed:
    started = [records for records in children if records.hello is not None]
    if not started:
        return Observed(outcome, unavailable="the observer did not start in the test process")
    if not all(records.hello["ok"] for records in started):
        errors = [r for records in started for r in records.of_kind("error")]
        why = f"{errors[0]['what']}: {errors[0].get('text', '')}" if errors else "CUPTI refused"
        return Observed(outcome, unavailable=f"the observer could not enable CUPTI ({why})")
    holding = [r for r in started if any(m["t"] == "memcpy" and m["bytes"] == markers[0] for m in r.records)]
    if not isinstance(outcome, dict):
        return Observed(outcome, problem=f"the observed run left no result: {outcome}")
    found = observe(holding[0] if holding else started[-1], markers, OBSERVED_CALLS)
    if isinstance(found, str):
        return Observed(outcome, problem=found)
    return Observed(outcome, found)


def observe_group(
    runner_args: dict, observer: Observer, group: str, device: str, cases: list[tuple[int, Case]], inputs: dict
) -> dict[int, Observed]:
    """{case index: Observed} for a perf group's `cases` on a GPU. runner_args: GroupRunner's
    (load, sandbox, work, env, deadline, shared, case_timeout, gpu_lock) for the student's build."""
    if not observer.built:
        return {index: Observed("not observed", unavailable=observer.unavailable) for index, _ in cases}
    markers = markers_for(cases)
    load = {**runner_args["load"], "observe": {str(index): list(pair) for index, pair in markers.items()}}
    runner = GroupRunner(**{**runner_args, "load": load}, prefix="observed_", observer=observer)
    outcomes = runner.run(group, device, cases, inputs)
    return {index: observed_case(outcomes[index], runner.observed, markers[index]) for index, _ in cases}
