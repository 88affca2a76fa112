"""Run: the plan's groups in order, each in fresh sandboxed children (autograder/runner.py),
judged as it ends (stages/judge.py): a later group's cases run only where the cases they
need passed. A perf group's baselines are timed first (autograder/baselines.py); a sanitizer
group runs under its tool (autograder/sanitized.py)."""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from types import ModuleType

import torch

from autograder.observer.session import observe_group
from autograder.observer.verdict import OwnKernels
from autograder.parent_checks import new_python_problems
from autograder.runner import GroupRunner, secret_order
from autograder.sanitized import sanitized_verdicts
from autograder.stages.build import Build
from autograder.stages.grading import Grading
from autograder.stages.judge import GraderFindings, judge_group, verdict
from autograder.stages.plan import Group, Plan
from autograder.suite_access import suite_request
from autograder.timed_kernels import profiled_case
from course.cases import Case, make_input_sets, needed
from course.judge import Verdict, needs_not_met
from course.kernel_names import defined_kernels, submission_files
from course.ops import op_for
from course.sanitize import SANITIZER


@dataclass(frozen=True)
class Ran:
    verdicts: dict[int, Verdict]  # by the case's index in the suite; only the cases planned
    seconds: dict[int, float]  # each case's time on the grader's clock, where it ran


def run_cases(plan: Plan, build: Build, grading: Grading, timings: dict[str, float]) -> Ran:
    """Run and judge every group of `plan`; adds the phases' seconds to `timings`."""
    built, start = build.built, time.perf_counter()
    student = {
        **suite_request(grading.unit, grading.sandbox),
        "plan": grading.unit.plan().to_json(),
        "built": built and asdict(built),
        "source_dir": build.source_dir,
    }
    runner = GroupRunner(
        student,
        grading.sandbox,
        grading.folder,
        grading.env,
        grading.deadline,
        prefix="run_",
        shared=(build.folder,),
        case_timeout=grading.case_timeout,
        gpu_lock=grading.gpu_lock,
    )
    # Read from the build's files here, as data: the child's profile names the kernels that ran,
    # and so does the observer, by the names the device code gives them.
    files = submission_files(built.library, built.prefix, build.source_dir) if built else []
    own_kernels = defined_kernels(files) if built else frozenset()
    own = OwnKernels.of_files(files)
    planned = {case.params.get("op") for group in plan.groups for _, case in group.cases}
    checked = new_python_problems(grading.unit, built, build.folder, grading, planned) if built else {}
    grader = GraderFindings(build.hidden_calls, {**build.file_problems, **checked})
    verdicts: dict[int, Verdict] = {}
    sanitizer_seconds: dict[int, float] = {}  # each sanitizer case's whole run under its tool
    for group in plan.groups:
        why = "not run: the build failed" if built is None else group.not_run
        if why:
            verdicts.update({index: Verdict(False, why) for index, _ in group.cases})
            continue
        ready = _ready(group, plan.spec.CASES, verdicts)
        if not ready:
            continue
        if ready[0][1].kind == SANITIZER:
            found, seconds = _sanitized(plan.spec, ready, student, build, grading, own_kernels)
            verdicts.update(found)
            sanitizer_seconds.update(seconds)
        else:
            observing = _observing(student, build, grading)
            kernels = (own_kernels, own, observing)
            verdicts.update(_tested(plan.spec, group, ready, runner, grading, kernels, timings, grader))
    timings["tests_s"] = time.perf_counter() - start
    _count_children(runner, grading, timings)
    return Ran(verdicts, {**runner.case_seconds, **sanitizer_seconds})


def _ready(group: Group, cases: list[Case], verdicts: dict[int, Verdict]) -> list[tuple[int, Case]]:
    """The group's cases whose needs passed; the others get their verdict here."""
    index_of = {case.name: index for index, case in enumerate(cases)}
    ready = []
    for index, case in group.cases:
        unmet = [
            name for name in needed(case, cases) if not (index_of[name] in verdicts and verdicts[index_of[name]].passed)
        ]
        if unmet:
            verdicts[index] = needs_not_met(case, unmet)
        else:
            ready.append((index, case))
    return ready


def _tested(
    spec: ModuleType,
    group: Group,
    ready: list[tuple[int, Case]],
    runner: GroupRunner,
    grading: Grading,
    kernels: tuple,
    timings: dict[str, float],
    grader: GraderFindings,
) -> dict[int, Verdict]:
    """kernels: (the identifiers the child's profile is judged by, OwnKernels for the observer,
    the observed child's GroupRunner arguments)."""
    own_kernels, own, observing = kernels
    ready = secret_order(ready, grading.seed)  # as the children are handed them
    with _adding_seconds(timings, "inputs_s"):
        input_sets = input_sets_of(spec, ready, grading.seed)
    timed = [(index, case) for index, case in ready if case.kind == "perf"]
    baselines = grading.baselines.run(group.name, group.device, timed, input_sets) if timed else {}
    # The cases the grader checks itself are not the test process's to run (autograder/parent_checks.py).
    to_run = [(index, case) for index, case in ready if not op_for(spec, input_sets[index][-1]).checked_by_grader]
    with _adding_seconds(timings, "runs_s"):
        outcomes = runner.run(group.name, group.device, to_run, input_sets) if to_run else {}
    observed = {}
    observed_cases = [(index, case) for index, case in timed if profiled_case(case) is not None]
    if observed_cases and grading.observer is not None:
        with _adding_seconds(timings, "observed_s"):
            observed = observe_group(observing, grading.observer, group.name, group.device, observed_cases, input_sets)
    with _adding_seconds(timings, "judging_s"):
        return judge_group(spec, ready, input_sets, outcomes, baselines, own_kernels, observed, own, grader)


def _observing(student: dict, build: Build, grading: Grading) -> dict:
    """The GroupRunner arguments of a child that loads the student's build, as its perf child
    does: the observed child's, and (without the cases' time limit) the sanitizer's."""
    return dict(
        load=student,
        sandbox=grading.sandbox,
        work=grading.folder,
        env=grading.env,
        deadline=grading.deadline,
        shared=(build.folder,),
        case_timeout=grading.case_timeout,
        gpu_lock=grading.gpu_lock,
    )


def _sanitized(
    spec: ModuleType,
    ready: list[tuple[int, Case]],
    student: dict,
    build: Build,
    grading: Grading,
    own_kernels: frozenset[str],
) -> tuple[dict[int, Verdict], dict[int, float]]:
    # A run under a sanitizer is many times slower: the cases' own time limits do not hold there.
    runner_args = {k: v for k, v in _observing(student, build, grading).items() if k != "case_timeout"}
    return sanitized_verdicts(
        spec,
        ready,
        runner_args,
        grading.seed,
        lambda case, inputs, outcome: verdict(spec, case, inputs, outcome, None, own_kernels),
    )


def input_sets_of(spec: ModuleType, cases: list[tuple[int, Case]], seed: int) -> dict[int, list[dict]]:
    """{index: the case's input sets}, the cases' made side by side: a perf case's set of 10^8
    elements takes seconds, most of them in torch's generator, which runs on one core."""
    with ThreadPoolExecutor(max(1, min(len(cases), torch.get_num_threads())), thread_name_prefix="inputs") as pool:
        made = {index: pool.submit(make_input_sets, spec, case, seed) for index, case in cases}
        return {index: future.result() for index, future in made.items()}


@contextlib.contextmanager
def _adding_seconds(timings: dict[str, float], key: str):
    """Adds the block's seconds to timings[key]: a grading's time, phase by phase."""
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[key] = timings.get(key, 0.0) + time.perf_counter() - start


def _count_children(runner: GroupRunner, grading: Grading, timings: dict[str, float]) -> None:
    """The children's part of the grading's time: their starts, the reference's fetch and
    timing, and, in a batch, the waits for the GPU's lock."""
    baselines = grading.baselines
    spawn_seconds = runner.spawn_seconds + baselines.spawn_seconds
    if baselines.build_s is not None:
        timings["reference_build_s"] = baselines.build_s
        timings["baselines_s"] = baselines.run_s
    timings["children"] = float(len(spawn_seconds))
    timings["child_start_s"] = sum(spawn_seconds)
    if grading.gpu_lock is not None:
        timings["gpu_lock_wait_s"] = runner.lock_wait_seconds + baselines.lock_wait_seconds
