"""Grade one submission of one unit. This process never loads student code: it builds
in a child, runs each group of cases in fresh children (autograder/runner.py), and judges
here.

Perf groups run last, after the cases they need: first torch's own op is timed in a
child that never loads the student's build (its time cannot be tampered with), then the
student's op in another, on the same inputs; the verdict is taken here."""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict

from autograder.results import Grade, TestResult
from autograder.runner import GroupRunner
from autograder.submission import materialize
from course.authoring.units import Unit
from course.build import BuildError, Built, build_in_subprocess, first_errors, libstdcxx_problem
from course.cases import Case, check_needs, make_input_sets, needed
from course.judge import Verdict, judge, needs_not_met

BUILD_TIMEOUT = 600


def public_case_names(unit: Unit) -> set[str]:
    """Cases students also see in the notebook: those its public_tests.py defines."""
    return {case.name for case in unit.tests(hidden=False).CASES}


def gpu_capability() -> str | None:
    """'8.0' for the first GPU, None without one; asked of a child, so this process never
    creates a CUDA context."""
    code = ("import torch; print('%d.%d' % torch.cuda.get_device_capability() "
            "if torch.cuda.is_available() else 'none')")
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    answer = probe.stdout.strip().splitlines()[-1:] or ["none"]
    return None if answer[0] == "none" else answer[0]


def child_env(capability: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADER_")}
    # Build for this machine's GPU (for sm_75, Colab's T4, without one), and find CUDA
    # where the nvcc on PATH is only a wrapper script.
    env.setdefault("TORCH_CUDA_ARCH_LIST", capability or "7.5")
    if "CUDA_HOME" not in env and os.path.exists("/usr/local/cuda/bin/nvcc"):
        env["CUDA_HOME"] = "/usr/local/cuda"
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.setdefault("MAX_JOBS", str(max(1, min(8, os.cpu_count() or 1))))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _in_run_order(groups: dict[str, list[tuple[int, Case]]]) -> list[tuple[str, list[tuple[int, Case]]]]:
    """Perf groups after the others, so the cases they need are judged before they run."""
    return sorted(groups.items(), key=lambda item: any(case.kind == "perf" for _, case in item[1]))


def _unmet_needs(case: Case, cases: list[Case], index_of: dict[str, int], verdicts: dict[int, Verdict]) -> list[str]:
    return [name for name in needed(case, cases)
            if not (index_of[name] in verdicts and verdicts[index_of[name]].passed)]


def build_stage(unit: Unit, source_dir: str, build_dir: str, missing: list[str], env: dict) -> tuple[TestResult, Built | None]:
    test = TestResult("build", 1.0, False, "", visibility="visible", tags=("build",))
    if missing:
        test.output = "missing from the submission: " + ", ".join(missing)
        return test, None
    try:
        built = build_in_subprocess(unit.plan(), source_dir, build_dir, timeout=BUILD_TIMEOUT, env=env)
    except BuildError as error:
        test.output = "\n".join([error.summary, *(error.errors or first_errors(error.log))])[:3000]
        return test, None
    test.passed, test.output = True, {"jit": "compiled", "wheel": "built and installed the wheel",
                                      "none": "nothing to build"}[unit.build]
    if built.library and libstdcxx_problem(built.library):  # the children would crash on it
        test.output += "\n" + libstdcxx_problem(built.library)
    return test, built


def grade(submission: str, unit: Unit, *, seed: int | None = None, work: str | None = None,
          has_gpu: bool | None = None) -> Grade:
    seed = secrets.randbits(62) if seed is None else seed
    work = work or tempfile.mkdtemp(prefix=f"grade_{unit.name}_")
    result = Grade(unit.name, seed=seed)
    capability = gpu_capability() if has_gpu is not False else None
    has_gpu = capability is not None
    env = child_env(capability)
    start = time.perf_counter()
    source_dir = os.path.join(work, "src")
    missing, result.answers = materialize(submission, unit, source_dir)
    build_test, built = build_stage(unit, source_dir, os.path.join(work, "build"), missing, env)
    result.tests.append(build_test)
    result.timings["build_s"] = time.perf_counter() - start

    spec = unit.tests(hidden=True)
    check_needs(spec.CASES)
    index_of = {case.name: index for index, case in enumerate(spec.CASES)}
    public = public_case_names(unit)
    groups: dict[str, list[tuple[int, Case]]] = {}
    for index, case in enumerate(spec.CASES):
        groups.setdefault(case.group, []).append((index, case))

    suite = {"solutions": unit.solutions, "unit": unit.name}
    student = {**suite, "plan": unit.plan().to_json(), "built": built and asdict(built), "source_dir": source_dir}
    runner = GroupRunner(student, os.path.join(work, "runs"), env)
    # No build: these children load no student code; they time torch's own op.
    baseline_runner = GroupRunner({**suite, "built": None}, os.path.join(work, "baseline"), env)
    verdicts: dict[int, Verdict] = {}
    tests_start = time.perf_counter()
    for group, cases in _in_run_order(groups):
        device = cases[0][1].device
        if built is None:
            verdicts.update({i: Verdict(False, "not run: the build failed") for i, _ in cases})
            continue
        if device == "cuda" and not has_gpu:
            verdicts.update({i: Verdict(False, "not run: no GPU on the grading machine") for i, _ in cases})
            continue
        ready = []
        for index, case in cases:
            unmet = _unmet_needs(case, spec.CASES, index_of, verdicts)
            if unmet:
                verdicts[index] = needs_not_met(case, unmet)
            else:
                ready.append((index, case))
        if not ready:
            continue
        input_sets = {index: make_input_sets(spec, case, seed) for index, case in ready}
        timed = [(index, case) for index, case in ready if case.kind == "perf"]
        baselines = baseline_runner.run(group, device, timed, input_sets) if timed else {}
        outcomes = runner.run(group, device, ready, input_sets)
        for index, case in ready:
            outcome = outcomes[index]
            verdicts[index] = judge(spec, case, input_sets[index], outcome, baselines.get(index)) \
                if isinstance(outcome, dict) else Verdict(False, outcome)
    result.timings["tests_s"] = time.perf_counter() - tests_start
    spawn_seconds = runner.spawn_seconds + baseline_runner.spawn_seconds
    result.timings["children"] = float(len(spawn_seconds))
    result.timings["child_start_s"] = sum(spawn_seconds)

    for index, case in enumerate(spec.CASES):
        verdict = verdicts[index]
        result.tests.append(TestResult(
            case.name, case.points, verdict.passed, verdict.message,
            visibility="visible" if case.name in public else "after_published",
            tags=(case.group, case.device), not_run=verdict.message.startswith("not run"),
            fraction=verdict.fraction))
        if verdict.measurements:
            result.perf[case.name] = verdict.measurements
    result.timings["total_s"] = time.perf_counter() - start
    return result
