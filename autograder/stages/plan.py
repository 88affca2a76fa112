"""Plan: which of the unit's cases run, in which groups, in which order, and which groups this
machine cannot run at all. Made before the build, so that the reference's fetch (baselines)
can start beside it."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from types import ModuleType

from autograder.machine import perf_runs_here
from course.cases import Case, check_needs
from course.dtypes import Toolchain, ToolchainSuite
from course.sanitize import SANITIZER


@dataclass(frozen=True)
class Group:
    name: str
    cases: list[tuple[int, Case]]  # (index in the suite's CASES, case)
    not_run: str = ""  # why this machine cannot run it; "" where it can

    @property
    def device(self) -> str:
        return self.cases[0][1].device


@dataclass(frozen=True)
class Plan:
    spec: ModuleType | ToolchainSuite  # the unit's hidden suite, its cases as they run here
    groups: list[Group]  # in run order
    times_perf: bool  # a perf case runs here: the reference is needed


def plan_cases(
    spec: ModuleType, patterns: tuple[str, ...], has_gpu: bool, gpus: int, toolchain: Toolchain | None = None
) -> Plan:
    """The plan for the cases of `spec` that match `patterns` (fnmatch; all when empty), on a
    machine with `gpus` GPUs (has_gpu: whether GPU cases run at all), each in the dtype
    `toolchain` can compile for Triton (course/dtypes.py; None: as declared)."""
    check_needs(spec.CASES)
    if toolchain is not None:
        spec = ToolchainSuite(spec, toolchain)
    selected = [
        (i, c)
        for i, c in enumerate(spec.CASES)
        if not patterns or any(fnmatch.fnmatchcase(c.name, p) for p in patterns)
    ]
    groups: dict[str, list[tuple[int, Case]]] = {}
    for index, case in selected:
        groups.setdefault(case.group, []).append((index, case))
    ordered = [
        Group(name, cases, _not_run_here(cases[0][1].device, has_gpu, gpus)) for name, cases in _in_run_order(groups)
    ]
    return Plan(spec, ordered, perf_runs_here([case for _, case in selected], has_gpu))


def _in_run_order(groups: dict[str, list[tuple[int, Case]]]) -> list[tuple[str, list[tuple[int, Case]]]]:
    """The children's work, in order. A device's correctness groups share one child (a crash
    or hang still costs only its own case: the rest go on in a fresh one), since starting a
    child (torch, the module, a CUDA context) takes longer than most groups' tests. Perf and
    sanitizer groups come last, each in children of its own, once the cases they need are judged."""
    merged: dict[str, list[tuple[int, Case]]] = {}
    apart: list[tuple[str, list[tuple[int, Case]]]] = []
    for group, cases in groups.items():
        if any(case.kind in ("perf", SANITIZER) for _, case in cases):
            apart.append((group, cases))
        else:
            merged.setdefault(cases[0][1].device, []).extend(cases)
    return sorted(merged.items()) + apart


def _not_run_here(device: str, has_gpu: bool, gpus: int) -> str:
    if device.startswith("cuda") and not has_gpu:
        return "not run: no GPU on the grading machine"
    if device.startswith("cuda:") and int(device.split(":")[1]) >= gpus:
        return f"not run: needs {device}, and the grading machine shows {gpus} GPU(s)"
    return ""
