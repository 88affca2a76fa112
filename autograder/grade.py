"""Grade one submission of one unit. This process never loads student code: it
builds in a child, runs each group of cases in a fresh child, and judges here.

Perf groups run last, after the cases they need: first torch's own op is timed in a
child that never loads the student's library (its time cannot be tampered with),
then the student's op in another, on the same inputs; the verdict is taken here."""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import torch

from autograder.submission import materialize
from course.build import BuildError, _kill_group, compile_in_subprocess, first_errors, split_sources
from course.cases import Case, check_needs, make_input_sets
from course.judge import Verdict, judge, needs_not_met
from course.units import Unit

BUILD_TIMEOUT = 600
CHILD_START_TIMEOUT = 120  # import torch, load the module, create the CUDA context
POLL_SECONDS = 0.05
MAX_RESTARTS = 4           # fresh children for one group after crashes


@dataclass
class TestResult:
    name: str
    max_score: float
    passed: bool
    output: str
    visibility: str = "after_published"
    tags: tuple[str, ...] = ()
    not_run: bool = False
    fraction: float | None = None  # of max_score earned (perf tests); None: all if passed, else none

    @property
    def score(self) -> float:
        earned = float(self.passed) if self.fraction is None else self.fraction
        return round(self.max_score * earned, 2)


@dataclass
class Grade:
    unit: str
    tests: list[TestResult] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)
    seed: int = 0
    perf: dict[str, dict] = field(default_factory=dict)  # perf test name: its timings and ratio


def public_case_names(unit: Unit) -> set[str]:
    """Cases students also see in the notebook: those outside the spec's HIDDEN block."""
    return {case.name for case in unit.load_spec(public_only=True).CASES}


def gpu_capability() -> str | None:
    """'8.0' for the first GPU, None without one; asked of a child, so this process never
    creates a CUDA context."""
    code = ("import torch; print('%d.%d' % torch.cuda.get_device_capability() "
            "if torch.cuda.is_available() else 'none')")
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    answer = probe.stdout.strip().splitlines()[-1:] or ["none"]
    return None if answer[0] == "none" else answer[0]


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _tail(path: str, lines: int = 6) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()[-4000:]
    except FileNotFoundError:
        return ""
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join("    | " + line[:200] for line in kept)


class GroupRunner:
    """Runs a list of cases in child processes, restarting after crashes and hangs."""

    def __init__(self, unit: Unit, spec_path: str, library: str, python: list[str], work: str, env: dict):
        self.unit, self.spec_path, self.library, self.python = unit, spec_path, library, python
        self.work, self.env = work, env
        self.spawn_seconds: list[float] = []

    def run(self, group: str, device: str, cases: list[tuple[int, Case]],
            inputs: dict[int, list[dict]]) -> dict[int, dict | str]:
        """{case index: raw result dict, or a string saying why there is none}."""
        outcomes: dict[int, dict | str] = {}
        pending = list(cases)
        for attempt in range(MAX_RESTARTS + 1):
            if not pending:
                break
            directory = os.path.join(self.work, f"{group}.{attempt}")
            os.makedirs(directory)
            for index, _ in pending:
                torch.save(inputs[index], os.path.join(directory, f"{index}.inputs.pt"))
            reason, touched = self._run_child(directory, device, pending)
            done = {index for index, _ in pending if os.path.exists(os.path.join(directory, f"{index}.result.pt"))}
            for index in done:
                outcomes[index] = torch.load(os.path.join(directory, f"{index}.result.pt"), weights_only=True)
            if touched is not None and touched not in done:
                outcomes[touched] = reason
            if touched is None and reason:  # died before running any case: it would again
                for index, _ in pending:
                    if index not in done:
                        outcomes[index] = reason
            pending = [(i, c) for i, c in pending if i not in outcomes]
        for index, _ in pending:
            outcomes[index] = "not run: the test process crashed too many times"
        return outcomes

    def _run_child(self, directory: str, device: str, cases: list[tuple[int, Case]]) -> tuple[str, int | None]:
        """Run one child over `cases`. Returns (why it stopped early or '', index of the case it
        was running when it did, or None if it never started one)."""
        request = {"unit": self.unit.name, "spec": self.spec_path, "library": self.library,
                   "python": self.python, "device": device, "cases": [(i, c.name) for i, c in cases]}
        with open(os.path.join(directory, "request.json"), "w") as handle:
            json.dump(request, handle)
        scratch = os.path.join(directory, "cwd")
        os.makedirs(scratch)
        started = time.perf_counter()
        with open(os.path.join(directory, "stdout.txt"), "wb") as out, \
                open(os.path.join(directory, "stderr.txt"), "wb") as err:
            process = subprocess.Popen([sys.executable, "-m", "autograder.child", directory], cwd=scratch,
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=self.env,
                                       start_new_session=True)
            reason, touched = self._watch(process, directory, cases, started)
        if reason and not reason.startswith("timed out"):
            tail = _tail(os.path.join(directory, "stderr.txt"))
            reason += ("\n  last lines on stderr:\n" + tail) if tail else ""
        return reason, touched

    def _watch(self, process: subprocess.Popen, directory: str, cases, started: float) -> tuple[str, int | None]:
        ready = os.path.join(directory, "ready")
        was_ready = False
        while True:
            code = process.poll()
            now = time.perf_counter()
            if not was_ready and os.path.exists(ready):
                was_ready = True
                self.spawn_seconds.append(now - started)
            running = self._running_case(directory, cases)
            if code is not None:
                return self._exit_reason(code, was_ready, directory, cases, running)
            if not was_ready and now - started > CHILD_START_TIMEOUT:
                _kill_group(process)
                return f"the module did not load within {CHILD_START_TIMEOUT} s", None
            if running is not None:
                index, case, since = running
                if time.time() - since > case.timeout:
                    _kill_group(process)
                    return f"timed out: still running after {case.timeout:.0f} s (an endless loop or a hang?)", index
            time.sleep(POLL_SECONDS)

    @staticmethod
    def _running_case(directory: str, cases) -> tuple[int, Case, float] | None:
        for index, case in cases:
            started = os.path.join(directory, f"{index}.started")
            if os.path.exists(started) and not os.path.exists(os.path.join(directory, f"{index}.result.pt")):
                return index, case, os.path.getmtime(started)
        return None

    @staticmethod
    def _exit_reason(code: int, was_ready: bool, directory: str, cases, running) -> tuple[str, int | None]:
        from autograder.child import CUDA_CONTEXT_LOST

        if code == 0 and all(os.path.exists(os.path.join(directory, f"{i}.result.pt")) for i, _ in cases):
            return "", None
        if code == CUDA_CONTEXT_LOST:
            return "", None  # the failing case wrote its own result; the rest get a fresh child
        how = f"was killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
        if not was_ready:
            return f"the test process {how} while loading the module (code that runs at import?)", None
        if running is not None:
            return f"the test process {how} during this test", running[0]
        return f"the test process {how} between tests", None


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


def _unmet_needs(case: Case, index_of: dict[str, int], verdicts: dict[int, Verdict]) -> list[str]:
    return [name for name in case.needs if not (index_of[name] in verdicts and verdicts[index_of[name]].passed)]


def build_stage(unit: Unit, source_dir: str, build_dir: str, missing: list[str], env: dict) -> tuple[TestResult, str | None]:
    test = TestResult("build", 1.0, False, "", visibility="visible", tags=("build",))
    if missing:
        test.output = "missing from the submission: " + ", ".join(missing)
        return test, None
    compiled, _ = split_sources([os.path.join(source_dir, f) for f in unit.built])
    try:
        library = compile_in_subprocess(unit.name, compiled, build_dir, timeout=BUILD_TIMEOUT, env=env)
    except BuildError as error:
        test.output = "\n".join([error.summary, *(error.errors or first_errors(error.log))])[:3000]
        return test, None
    test.passed, test.output = True, "compiled"
    return test, library


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
    build_test, library = build_stage(unit, source_dir, os.path.join(work, "build"), missing, env)
    result.tests.append(build_test)
    result.timings["build_s"] = time.perf_counter() - start

    spec = unit.load_spec()
    check_needs(spec.CASES)
    index_of = {case.name: index for index, case in enumerate(spec.CASES)}
    public = public_case_names(unit)
    groups: dict[str, list[tuple[int, Case]]] = {}
    for index, case in enumerate(spec.CASES):
        groups.setdefault(case.group, []).append((index, case))

    python = [os.path.join(source_dir, f) for f in unit.built if f.endswith(".py")]
    runner = GroupRunner(unit, unit.spec_path(), library or "", python, os.path.join(work, "runs"), env)
    # Library "": these children load no student code; they time torch's own op.
    baseline_runner = GroupRunner(unit, unit.spec_path(), "", [], os.path.join(work, "baseline"), env)
    verdicts: dict[int, Verdict] = {}
    tests_start = time.perf_counter()
    for group, cases in _in_run_order(groups):
        device = cases[0][1].device
        if library is None:
            verdicts.update({i: Verdict(False, "not run: the build failed") for i, _ in cases})
            continue
        if device == "cuda" and not has_gpu:
            verdicts.update({i: Verdict(False, "not run: no GPU on the grading machine") for i, _ in cases})
            continue
        ready = []
        for index, case in cases:
            unmet = _unmet_needs(case, index_of, verdicts)
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
