"""The perf groups' baselines: torch's op and the course's reference solution
(autograder/reference.py), timed in children that never load the student's build, so that
their times cannot be tampered with. The student's op is timed afterwards, in another child,
on the same inputs; the verdict, the reference's time over the student's, is taken in the
grader's process (autograder/stages/judge.py)."""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from autograder.deadline import Deadline
from autograder.gpu_lock import GpuLock
from autograder.grade_options import BUILD_TIMEOUT
from autograder.reference import reference
from autograder.runner import GroupRunner
from autograder.sandbox import Sandbox
from autograder.suite_access import suite_request
from course.build import BuildError
from course.cases import Case
from course.spec.units import Unit


@dataclass(frozen=True)
class ChildSetting:
    """Where and how a grading's children run: what the baselines' children share with the
    student's (autograder/stages/grading.py opens it)."""

    sandbox: Sandbox
    work: str  # the grading's folder
    env: dict
    deadline: Deadline
    case_timeout: float | None = None
    gpu_lock: GpuLock | None = None


class Baselines:
    """The reference comes from its cache, or is built, in a thread started with the grading
    (prefetch) or at the first perf group."""

    def __init__(self, unit: Unit, setting: ChildSetting):
        self.unit, self.setting = unit, setting
        self.spawn_seconds: list[float] = []
        self.lock_wait_seconds = 0.0
        self.build_s: float | None = None
        self.run_s = 0.0  # in the baseline children, after the reference was fetched
        self._pool: ThreadPoolExecutor | None = None
        self._fetch: Future | None = None  # of the Reference, or why there is none

    def prefetch(self) -> None:
        if self._fetch is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="reference")
            self._fetch = self._pool.submit(self._reference)

    def close(self) -> None:
        """Wait for a fetch still running: a build left half done helps no later grading."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def _reference(self):
        start = time.perf_counter()
        try:
            left = self.setting.deadline.left()
            return reference(self.unit, self.setting.env, timeout=max(1.0, min(BUILD_TIMEOUT, left)))
        except BuildError as error:
            return f"the reference solution did not build here: {error.summary}"
        except Exception as error:
            return f"the reference solution could not be fetched: {type(error).__name__}: {error}"
        finally:
            self.build_s = time.perf_counter() - start

    def run(
        self, group: str, device: str, cases: list[tuple[int, Case]], inputs: dict[int, list[dict]]
    ) -> dict[int, dict | str]:
        """{index: the baseline child's raw result, or why there is none} for a perf group."""
        self.prefetch()
        found = self._fetch.result()
        if isinstance(found, str):
            return {index: found for index, _ in cases}
        start = time.perf_counter()
        # A fresh copy per group, made after the student's last child was stopped.
        setting = self.setting
        box, load = found.copy_into(setting.sandbox.folder(setting.work, "reference_"))
        setting.sandbox.give(box)
        runner = GroupRunner(
            {**suite_request(self.unit, setting.sandbox), "built": None, "reference": load},
            setting.sandbox,
            setting.work,
            setting.env,
            setting.deadline,
            prefix="baseline_",
            shared=(box,),
            case_timeout=setting.case_timeout,
            gpu_lock=setting.gpu_lock,
        )
        outcomes = runner.run(group, device, cases, inputs)
        self.spawn_seconds += runner.spawn_seconds
        self.lock_wait_seconds += runner.lock_wait_seconds
        self.run_s += time.perf_counter() - start
        return outcomes
