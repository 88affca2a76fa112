"""What every stage of one grading shares: its folder, sandbox, children's environment, time
limit, GPUs, the batch's GPU lock and the perf baselines. Opened before the first stage and
closed after the last, with every process the grading started."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from autograder.baselines import Baselines, ChildSetting
from autograder.deadline import Deadline
from autograder.gpu_lock import GpuLock
from autograder.grade_options import GradeOptions
from autograder.machine import child_env, gpu_capability, gpu_count, gpu_free_bytes
from autograder.observer.session import Observer
from autograder.sandbox import Sandbox
from autograder.suite_access import hidden_from_runs, suite_files
from course.dtypes import Toolchain
from course.spec.units import Unit


@dataclass(frozen=True)
class Grading:
    unit: Unit
    seed: int
    folder: str  # the grading's own, removed at the end unless kept
    sandbox: Sandbox
    env: dict  # the children's (autograder/machine.py)
    deadline: Deadline
    capability: str | None  # the GPU's; None: no GPU case runs
    gpus: int  # how many the children see
    gpu_lock: GpuLock | None  # in a batch on a GPU
    case_timeout: float | None
    baselines: Baselines
    observer: Observer | None = None  # on a GPU: perf cases' calls observed from outside their process
    gpu_free_bytes: int | None = None  # the first GPU's, as a child saw it; None: not known

    @property
    def has_gpu(self) -> bool:
        return self.capability is not None

    @property
    def toolchain(self) -> Toolchain:
        """The children's GPU and Triton: which dtypes Triton cases run in (course/dtypes.py)."""
        return Toolchain.for_capability(self.capability)


@contextlib.contextmanager
def open_grading(unit: Unit, options: GradeOptions) -> Iterator[Grading]:
    seed = secrets.randbits(62) if options.seed is None else options.seed
    deadline = Deadline(options.time_limit)
    parent = options.work or tempfile.gettempdir()
    os.makedirs(parent, exist_ok=True)
    root = tempfile.mkdtemp(prefix=f"grade_{unit.name}_", dir=parent)
    capability = gpu_capability() if options.has_gpu is not False else None
    gpus = gpu_count() if capability is not None else 0  # the same probe's answer
    env = child_env(capability)
    sandbox = Sandbox.open(
        options.sandbox_mode,
        root,
        read_only=suite_files(unit),
        hidden=hidden_from_runs(unit, options.gpu_lock, options.keep_build, options.prebuilt),
        env=env,
    )
    lock = GpuLock(options.gpu_lock) if options.gpu_lock and capability is not None else None
    baselines = Baselines(unit, ChildSetting(sandbox, root, env, deadline, options.case_timeout, lock))
    try:
        observer = Observer(env) if capability is not None else None
        free = gpu_free_bytes() if capability is not None else None
        yield Grading(
            unit,
            seed,
            root,
            sandbox,
            env,
            deadline,
            capability,
            gpus,
            lock,
            options.case_timeout,
            baselines,
            observer=observer,
            gpu_free_bytes=free,
        )
    finally:  # the sandbox's processes first: waiting for the reference's build may take minutes
        sandbox.close()
        baselines.close()
        if not options.keep_work:
            shutil.rmtree(root, ignore_errors=True)
