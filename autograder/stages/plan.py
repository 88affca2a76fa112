"""Plan: which of the unit's cases run, in which groups, in which order, and which groups this
machine cannot run at all (no GPU, one GPU too few, too little GPU memory for a case). Made before the build, so that the reference's fetch (baselines)
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
    counted: bool = True  # False: not run here, and its points are left out of the total

    @property
    def device(self) -> str:
        return self.cases[0][1].device


@dataclass(frozen=True)
class Plan:
    spec: ModuleType | ToolchainSuite  # the unit's hidden suite, its cases as they run here
    groups: list[Group]  # in run order
    times_perf: bool  # a perf case runs here: the reference is needed

    @property
    def uncounted(self) -> set[int]:
        """The cases whose points this machine leaves out of the total."""
        return {index for group in self.groups if not group.counted for index, _ in group.cases}


def plan_cases(
    spec: ModuleType,
    patterns: tuple[str, ...],
    has_gpu: bool,
    gpus: int,
    toolchain: Toolchain | None = None,
    gpu_free_bytes: int | None = None,
) -> Plan:
    """The plan for the cases of `spec` that match `patterns` (fnmatch; all when empty), on a
    machine with `gpus` GPUs (has_gpu: whether GPU cases run at all) and `gpu_free_bytes` of
    free memory on the first (None: not known), each in the dtype `toolchain` can compile for
    Triton (course/dtypes.py; None: as declared)."""
    check_needs(spec.CASES)
    if toolchain is not None:
        spec = ToolchainSuite(spec, toolchain)
    selected = [
        (i, c)
        for i, c in enumerate(spec.CASES)
        if not patterns or any(fnmatch.fnmatchcase(c.name, p) for p in patterns)
    ]
    too_large = {i: why for i, c in selected if has_gpu and (why := memory_short(c, gpu_free_bytes))}
    groups: dict[str, list[tuple[int, Case]]] = {}
    for index, case in selected:
        if index not in too_large:
            groups.setdefault(case.group, []).append((index, case))
    ordered = [_group_here(name, cases, has_gpu, gpus) for name, cases in _in_run_order(groups)]
    ordered += [Group(c.group, [(i, c)], too_large[i], counted=False) for i, c in selected if i in too_large]
    runs = [case for index, case in selected if index not in too_large]
    return Plan(spec, ordered, perf_runs_here(runs, has_gpu))


def memory_short(case: Case, free_bytes: int | None) -> str:
    """Why a GPU with `free_bytes` free cannot run `case` (Case.gpu_memory), or ''. Such a case
    is a lesson the machine is too small for, not the student's failure: its points are left
    out of the total."""
    if not case.device.startswith("cuda") or free_bytes is None or case.gpu_memory <= free_bytes:
        return ""
    return (
        f"not run: needs {case.gpu_memory / 2**30:.1f} GiB of GPU memory, and the grading machine's GPU has "
        f"{free_bytes / 2**30:.1f} GiB free; its points are left out of the total"
    )


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


def _group_here(name: str, cases: list[tuple[int, Case]], has_gpu: bool, gpus: int) -> Group:
    """The group as this machine runs it. A case on a second GPU that the machine lacks is, like
    one it has too little memory for, a lesson the machine cannot give: its points are left out
    of the total. Without any GPU the GPU cases stay counted: such a grading is a preview of
    the CPU paths, not a grade."""
    device = cases[0][1].device
    if device.startswith("cuda") and not has_gpu:
        return Group(name, cases, "not run: no GPU on the grading machine")
    if device.startswith("cuda:") and int(device.split(":")[1]) >= gpus:
        why = (
            f"not run: needs {device}, and the grading machine shows {gpus} GPU(s); "
            "its points are left out of the total"
        )
        return Group(name, cases, why, counted=False)
    return Group(name, cases)
