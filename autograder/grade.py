"""Grade one submission of one unit. This process never loads student code: it builds
in a child, runs each group of cases in fresh children (autograder/runner.py), and judges
here.

Perf groups run last, after the cases they need: first the course's reference solution
(autograder/reference.py) and torch's own op are timed in a child that never loads the
student's build (their times cannot be tampered with), then the student's op in another, on
the same inputs; the verdict, the reference's time over the student's, is taken here."""
from __future__ import annotations

import contextlib
import fnmatch
import functools
import glob
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict

import torch

from autograder.build_log import BUILD_LOG, public_roots, student_errors
from autograder.deadline import Deadline
from autograder.gpu_lock import GpuLock
from autograder.result_schema import result_problem, timing_problem
from autograder.results import Grade, TestResult
from autograder.reference import reference
from autograder.runner import GroupRunner
from autograder.sandbox import CPUS, Limits, Sandbox, python_command
from autograder.sanitized import sanitized_verdicts
from autograder.timed_kernels import own_code_at_timed_size
from autograder.stored_build import StoredBuild, store
from autograder.submission import SubmissionError, materialize
from autograder.untrusted_files import is_regular_file
from course.build import BuildError, Built, build_args, libstdcxx_problem, read_built
from course.cases import Case, check_needs, make_input_sets, needed
from course.judge import Verdict, judge, needs_not_met
from course.kernel_names import defined_kernels, submission_files
from course.sanitize import SANITIZER
from course.spec.questions import MAX_ANSWER_CHARS, WRITTEN, answer_text, questions
from course.spec.units import Unit

BUILD_TIMEOUT = 600
OWN_TESTS_TIMEOUT = 300
OWN_TESTS_LINE = 300  # characters of one line of the package's pytest output kept in the report
OWN_TESTS = "own_tests"  # the tag of a package's own tests in results.json: reported, worth no points
TIME_LIMIT = 3600  # the whole grading: build, every test, the children's starts


def public_case_names(unit: Unit) -> set[str]:
    """Cases students also see in the notebook: those its public_tests.py defines."""
    return {case.name for case in unit.tests(hidden=False).CASES}


GPU_PROBE_ENV = "GRADER_GPU_PROBE"  # grade-all's answer for the GPUs it hands a grading


def gpu_capability() -> str | None:
    """'8.0' for the first GPU, None without one; asked of a child, so this process never
    creates a CUDA context. Asked once per process and set of visible GPUs."""
    return _gpus_of(os.environ.get("CUDA_VISIBLE_DEVICES"))[0]


def gpu_count() -> int:
    """How many GPUs the children see (cases on cuda:1 need two)."""
    return _gpus_of(os.environ.get("CUDA_VISIBLE_DEVICES"))[1]


def gpu_probe_env(visible_devices: str) -> dict[str, str]:
    """For a grading on `visible_devices`: what this process found there, so that the grading
    need not start a process of its own to ask (grade-all starts hundreds of gradings)."""
    capability, count = _gpus_of(visible_devices)
    return {GPU_PROBE_ENV: json.dumps([visible_devices, capability, count])}


@functools.lru_cache(maxsize=None)
def _gpus_of(visible_devices: str | None) -> tuple[str | None, int]:
    try:  # grade-all asked already, for these GPUs
        visible, capability, count = json.loads(os.environ.get(GPU_PROBE_ENV, ""))
        if visible == visible_devices:
            return capability, int(count)
    except (ValueError, TypeError):
        pass
    code = ("import torch; print('%d.%d %d' % (*torch.cuda.get_device_capability(), torch.cuda.device_count()) "
            "if torch.cuda.is_available() else 'none 0')")
    env = dict(os.environ)
    if visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible_devices
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    answer = (probe.stdout.strip().splitlines()[-1:] or ["none 0"])[0].split()
    if len(answer) != 2 or answer[0] == "none":
        return None, 0
    return answer[0], int(answer[1])


def child_env(capability: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADER_")}
    # Build for this machine's GPU (for sm_75, Colab's T4, without one), and find CUDA
    # where the nvcc on PATH is only a wrapper script.
    env.setdefault("TORCH_CUDA_ARCH_LIST", capability or "7.5")
    if "CUDA_HOME" not in env and os.path.exists("/usr/local/cuda/bin/nvcc"):
        env["CUDA_HOME"] = "/usr/local/cuda"
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.setdefault("MAX_JOBS", str(min(8, CPUS)))
    env["PYTHONUNBUFFERED"] = "1"
    return env


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


def _unmet_needs(case: Case, cases: list[Case], index_of: dict[str, int], verdicts: dict[int, Verdict]) -> list[str]:
    return [name for name in needed(case, cases)
            if not (index_of[name] in verdicts and verdicts[index_of[name]].passed)]


def _read_and_build(unit: Unit, submission: str, sandbox: Sandbox, work: str, env: dict, deadline: Deadline,
                    build_timeout: float) -> tuple[TestResult, Built | None, str, str, dict]:
    """(the build test, what was built or None, the build's folder, the sources' folder, the
    written answers). The build runs in the sandbox, in a folder of its own."""
    test = TestResult("build", 1.0, False, "", visibility="visible", tags=("build",))
    box = sandbox.folder(work, "build.")
    source_dir, build_dir = os.path.join(box, "src"), os.path.join(box, "build")
    try:
        missing, answers = materialize(submission, unit, source_dir)
    except (SubmissionError, OSError) as error:
        test.output = f"the submission could not be read: {error}"
        return test, None, box, source_dir, {}
    answers = _kept_answers(unit, answers)
    if missing:
        test.output = "missing from the submission: " + ", ".join(missing)
        return test, None, box, source_dir, answers
    os.makedirs(build_dir)
    sandbox.give(box)
    timeout = min(build_timeout, deadline.left())
    code, log = sandbox.run(python_command(*build_args(unit.plan(), source_dir, build_dir)), timeout=timeout,
                            writable=[box], cwd=box, env=env, limits=Limits(cpu_seconds=int(timeout * CPUS) + 60),
                            ccache=True)
    if code is None:
        test.output = f"the build took longer than {timeout:.0f} s and was stopped"
        return test, None, box, source_dir, answers
    try:
        record = os.path.join(build_dir, "built.json")  # a package's setup.py could make it a FIFO
        if os.path.lexists(record) and not is_regular_file(record):
            raise BuildError(f"build of {unit.name} left a built.json that is not a regular file", log, [])
        built = read_built(unit.plan(), build_dir, code, log)
    except BuildError as error:
        errors = student_errors(error.log, source_dir, build_dir, public_roots(env)) or (
            "No error was found in your own files: the build failed outside them. Your instructor "
            f"finds the whole log in {BUILD_LOG} beside the results.")
        test.output = "\n".join(filter(None, [error.summary, errors]))
        test.log = error.log
        return test, None, box, source_dir, answers
    test.passed, test.output = True, {"jit": "compiled", "wheel": "built and installed the wheel",
                                      "none": "nothing to build"}[unit.build]
    if built.library and libstdcxx_problem(built.library):  # the children would crash on it
        test.output += "\n" + libstdcxx_problem(built.library)
    return test, built, box, source_dir, answers


def _keep(folder: str, source_dir: str, built: Built, unit: Unit, box: str) -> None:
    """Store the build for the perf step; one it cannot store, it builds again."""
    try:
        store(folder, source_dir, built, unit.plan().to_json(), within=box)
    except (OSError, ValueError) as error:
        print(f"warning: the build was not kept for the perf step: {error}", file=sys.stderr)


def _from_first_step(stored: StoredBuild, sandbox: Sandbox, work: str) -> tuple[TestResult, Built, str, str]:
    """(the build test, the build, its folder, the sources' folder) of a fresh copy of the
    build the first step kept."""
    box, load = stored.copy_into(sandbox.folder(work, "prebuilt."))
    sandbox.give(box)
    test = TestResult("build", 1.0, True, "built in the grading's first step", visibility="visible", tags=("build",))
    return test, Built(**load["built"]), box, load["source_dir"]


@contextlib.contextmanager
def _adding_seconds(timings: dict[str, float], key: str):
    """Adds the block's seconds to timings[key]: a grading's time, phase by phase."""
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[key] = timings.get(key, 0.0) + time.perf_counter() - start


def _input_sets(spec, cases: list[tuple[int, Case]], seed: int) -> dict[int, list[dict]]:
    """{index: the case's input sets}, the cases' made side by side: a perf case's set of 10^8
    elements takes seconds, most of them in torch's generator, which runs on one core."""
    with ThreadPoolExecutor(max(1, min(len(cases), torch.get_num_threads())), thread_name_prefix="inputs") as pool:
        made = {index: pool.submit(make_input_sets, spec, case, seed) for index, case in cases}
        return {index: future.result() for index, future in made.items()}


def _verdict(spec, case: Case, input_sets: list[dict], outcome, baseline, own_kernels: frozenset[str]) -> Verdict:
    """The judge's verdict on a child's raw result, once the result is known to be well formed."""
    if not isinstance(outcome, dict):
        return Verdict(False, outcome)
    try:  # a check the result gets past in a way not foreseen costs this case, never the whole report
        problem = result_problem(spec, case, input_sets, outcome)
        # A baseline that raised is not malformed: the judge reports the case as not run, with why.
        if not problem and case.kind == "perf" and isinstance(baseline, dict) and "exception" not in baseline:
            why = timing_problem(baseline) or timing_problem(baseline, "reference_timing")
            problem = why and f"the run timing torch's op and the reference returned {why}"
        if problem:
            return Verdict(False, f"the test process returned a malformed result: {problem}")
        verdict = judge(spec, case, input_sets, outcome, baseline, own_kernels)
        return own_code_at_timed_size(spec, case, input_sets, outcome, verdict, own_kernels)
    except Exception as error:  # noqa: BLE001
        return Verdict(False, f"the grader could not judge this result ({type(error).__name__}: {str(error)[:300]})")


def suite_files(unit: Unit) -> list[str]:
    """What a test process reads of the course's solutions: the unit's public suite (the ops'
    calls; each case comes to it as data) and the shared Python pieces it may import. Under
    bubblewrap it sees nothing else there: no hidden case, reference source, answer key or
    mutant, and no other unit."""
    common = os.path.join(unit.solutions, "common")
    shared = sorted(glob.glob(os.path.join(common, "*.py")))
    return [unit.suite_path(hidden=False), *shared]


def hidden_from_runs(unit: Unit, *batch_paths: str | None) -> list[str]:
    """Folders a bwrap run sees empty: the course's solutions (but for suite_files), and in a
    batch the folders of its GPU locks and kept builds (batch_paths: files in them). A run of
    the grader's own uid could otherwise take a lock and hold up another grading's timing, or
    read another student's sources."""
    # The repository's .git holds every file of solutions/ too, as objects `git show` reads.
    git = os.path.join(os.path.dirname(os.path.abspath(unit.solutions)), ".git")
    folders = [unit.solutions, git, *(os.path.dirname(os.path.abspath(path)) for path in batch_paths if path)]
    return [f for f in folders if not any(f != o and f.startswith(o.rstrip(os.sep) + os.sep) for o in folders)]


def perf_runs_here(cases, has_gpu: bool) -> bool:
    """Whether any of `cases` is a perf case this machine can run (a GPU one needs a GPU)."""
    return any(case.kind == "perf" and (has_gpu or not case.device.startswith("cuda")) for case in cases)


def _suite(unit: Unit) -> dict:
    """What a child's request names of the suite to import."""
    return {"solutions": unit.solutions, "unit": unit.name}


def _selected(cases: list[Case], patterns: tuple[str, ...]) -> list[tuple[int, Case]]:
    return [(i, c) for i, c in enumerate(cases) if not patterns or any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]


def grade(submission: str, unit: Unit, *, seed: int | None = None, work: str | None = None,
          has_gpu: bool | None = None, sandbox_mode: str = "auto", time_limit: float = TIME_LIMIT,
          build_timeout: float = BUILD_TIMEOUT, case_timeout: float | None = None, tests: tuple[str, ...] = (),
          keep_work: bool = False, own_tests: bool = True, gpu_lock: str | None = None,
          keep_build: str | None = None, prebuilt: str | None = None) -> Grade:
    """Grade `submission` in a new folder under `work` (the temp folder by default), removed at
    the end with every process the grading started. `tests`: fnmatch patterns of the cases to
    run (default all); `case_timeout`: a cap on every case's own time limit; `sandbox_mode`: one
    of autograder.sandbox.MODES; own_tests: run a package's own tests/ too (reported, no points);
    gpu_lock: the GPU's lock files in a batch (autograder/gpu_lock.py), so that perf cases time
    with nothing else of the batch on the GPU. In a batch's two steps, keep_build: a new folder
    the first step stores its build into, before any test process runs; prebuilt: that folder,
    which the perf step runs instead of building again (it builds where there is none)."""
    seed = secrets.randbits(62) if seed is None else seed
    deadline = Deadline(time_limit)
    parent = work or tempfile.gettempdir()
    os.makedirs(parent, exist_ok=True)
    root = tempfile.mkdtemp(prefix=f"grade_{unit.name}_", dir=parent)
    capability = gpu_capability() if has_gpu is not False else None
    env = child_env(capability)
    sandbox = Sandbox.open(sandbox_mode, root, read_only=suite_files(unit),
                           hidden=hidden_from_runs(unit, gpu_lock, keep_build, prebuilt), env=env)
    lock = GpuLock(gpu_lock) if gpu_lock and capability is not None else None
    baselines = _Baselines(unit, sandbox, root, env, deadline, case_timeout, lock)
    try:
        result = _grade(submission, unit, seed, root, sandbox, env, deadline, capability is not None, baselines,
                        build_timeout=build_timeout, case_timeout=case_timeout, tests=tests, own_tests=own_tests,
                        gpu_lock=lock, keep_build=keep_build, prebuilt=prebuilt)
    finally:  # the sandbox's processes first: waiting for the reference's build may take minutes
        sandbox.close()
        baselines.close()
        if not keep_work:
            shutil.rmtree(root, ignore_errors=True)
    return result


def _grade(submission: str, unit: Unit, seed: int, work: str, sandbox: Sandbox, env: dict, deadline: Deadline,
           has_gpu: bool, baselines: "_Baselines", *, build_timeout: float, case_timeout: float | None,
           tests: tuple[str, ...], own_tests: bool, gpu_lock: GpuLock | None, keep_build: str | None,
           prebuilt: str | None) -> Grade:
    result = Grade(unit.name, seed=seed, sandbox=sandbox.describe())
    spec = unit.tests(hidden=True)
    check_needs(spec.CASES)
    selected = _selected(spec.CASES, tests)
    if perf_runs_here([case for _, case in selected], has_gpu):
        baselines.prefetch()  # a cold build of the reference runs beside the student's
    start = time.perf_counter()
    stored = StoredBuild.open(prebuilt) if prebuilt else None
    if stored is not None:
        build_test, built, build_box, source_dir = _from_first_step(stored, sandbox, work)
    else:
        build_test, built, build_box, source_dir, result.answers = _read_and_build(
            unit, submission, sandbox, work, env, deadline, build_timeout)
        if keep_build and built is not None:
            _keep(keep_build, source_dir, built, unit, build_box)
    result.timings["build_s"] = build_test.seconds = time.perf_counter() - start
    result.tests.append(build_test)

    index_of = {case.name: index for index, case in enumerate(spec.CASES)}
    public = public_case_names(unit)
    groups: dict[str, list[tuple[int, Case]]] = {}
    for index, case in selected:
        groups.setdefault(case.group, []).append((index, case))

    student = {**_suite(unit), "plan": unit.plan().to_json(), "built": built and asdict(built),
               "source_dir": source_dir}
    runner = GroupRunner(student, sandbox, work, env, deadline, prefix="run_", shared=(build_box,),
                         case_timeout=case_timeout, gpu_lock=gpu_lock)
    # Read from the build's files here, as data: the child's profile names the kernels that ran.
    own_kernels = defined_kernels(submission_files(built.library, built.prefix, source_dir)) if built else frozenset()
    verdicts: dict[int, Verdict] = {}
    sanitizer_seconds: dict[int, float] = {}  # each sanitizer case's whole run under its tool
    tests_start = time.perf_counter()
    for group, cases in _in_run_order(groups):
        device = cases[0][1].device
        if built is None:
            verdicts.update({i: Verdict(False, "not run: the build failed") for i, _ in cases})
            continue
        if device.startswith("cuda") and not has_gpu:
            verdicts.update({i: Verdict(False, "not run: no GPU on the grading machine") for i, _ in cases})
            continue
        if device.startswith("cuda:") and int(device.split(":")[1]) >= gpu_count():
            verdicts.update({i: Verdict(False, f"not run: needs {device}, and the grading machine shows "
                                               f"{gpu_count()} GPU(s)") for i, _ in cases})
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
        if ready[0][1].kind == SANITIZER:
            found, timed_runs = sanitized_verdicts(spec, ready, dict(
                load=student, sandbox=sandbox, work=work, env=env, deadline=deadline, shared=(build_box,),
                gpu_lock=gpu_lock), seed,
                lambda case, inputs, outcome: _verdict(spec, case, inputs, outcome, None, own_kernels))
            verdicts.update(found)
            sanitizer_seconds.update(timed_runs)
            continue
        with _adding_seconds(result.timings, "inputs_s"):
            input_sets = _input_sets(spec, ready, seed)
        timed = [(index, case) for index, case in ready if case.kind == "perf"]
        timings = baselines.run(group, device, timed, input_sets) if timed else {}
        with _adding_seconds(result.timings, "runs_s"):
            outcomes = runner.run(group, device, ready, input_sets)
        with _adding_seconds(result.timings, "judging_s"):
            for index, case in ready:
                verdicts[index] = _verdict(spec, case, input_sets[index], outcomes[index], timings.get(index),
                                           own_kernels)
    result.timings["tests_s"] = time.perf_counter() - tests_start
    spawn_seconds = runner.spawn_seconds + baselines.spawn_seconds
    if baselines.build_s is not None:
        result.timings["reference_build_s"] = baselines.build_s
        result.timings["baselines_s"] = baselines.run_s
    result.timings["children"] = float(len(spawn_seconds))
    result.timings["child_start_s"] = sum(spawn_seconds)
    if gpu_lock is not None:
        result.timings["gpu_lock_wait_s"] = runner.lock_wait_seconds + baselines.lock_wait_seconds

    seconds = {**runner.case_seconds, **sanitizer_seconds}
    for index, case in enumerate(spec.CASES):
        if index not in verdicts:  # not among the tests asked for
            continue
        verdict = verdicts[index]
        result.tests.append(TestResult(
            case.name, case.points, verdict.passed, verdict.message,
            visibility="visible" if case.name in public else "after_published",
            tags=(case.group, case.device), not_run=verdict.message.startswith("not run"),
            fraction=verdict.fraction, seconds=seconds.get(index)))
        if verdict.measurements:
            result.perf[case.name] = verdict.measurements
    has_own_tests = unit.build == "wheel" and os.path.isdir(os.path.join(source_dir, "tests"))
    if own_tests and built is not None and has_own_tests:
        own_start = time.perf_counter()
        own = _own_tests(built, source_dir, sandbox, build_box, env, deadline, gpu_lock)
        own.seconds = time.perf_counter() - own_start
        result.tests.append(own)
    result.tests += _written(unit, result.answers)
    result.timings["total_s"] = time.perf_counter() - start
    return result


class _Baselines:
    """The perf groups' baseline runs: torch's op and the reference, in children that load no
    student code. The reference comes from its cache, or is built, in a thread started with the
    grading (prefetch) or at the first perf group."""

    def __init__(self, unit: Unit, sandbox: Sandbox, work: str, env: dict, deadline: Deadline,
                 case_timeout: float | None, gpu_lock: GpuLock | None):
        self.unit, self.sandbox, self.work, self.env = unit, sandbox, work, env
        self.deadline, self.case_timeout, self.gpu_lock = deadline, case_timeout, gpu_lock
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
            return reference(self.unit, self.env, timeout=max(1.0, min(BUILD_TIMEOUT, self.deadline.left())))
        except BuildError as error:
            return f"the reference solution did not build here: {error.summary}"
        except Exception as error:  # noqa: BLE001 - a cache it cannot use costs the perf cases, not the report
            return f"the reference solution could not be fetched: {type(error).__name__}: {error}"
        finally:
            self.build_s = time.perf_counter() - start

    def run(self, group: str, device: str, cases: list[tuple[int, Case]],
            inputs: dict[int, list[dict]]) -> dict[int, dict | str]:
        self.prefetch()
        found = self._fetch.result()
        if isinstance(found, str):
            return {index: found for index, _ in cases}
        start = time.perf_counter()
        # A fresh copy per group, made after the student's last child was stopped.
        box, load = found.copy_into(self.sandbox.folder(self.work, "reference_"))
        self.sandbox.give(box)
        runner = GroupRunner({**_suite(self.unit), "built": None, "reference": load}, self.sandbox, self.work, self.env,
                             self.deadline, prefix="baseline_", shared=(box,), case_timeout=self.case_timeout,
                             gpu_lock=self.gpu_lock)
        outcomes = runner.run(group, device, cases, inputs)
        self.spawn_seconds += runner.spawn_seconds
        self.lock_wait_seconds += runner.lock_wait_seconds
        self.run_s += time.perf_counter() - start
        return outcomes


def _own_tests(built: Built, source_dir: str, sandbox: Sandbox, box: str, env: dict,
               deadline: Deadline, gpu_lock: GpuLock | None) -> TestResult:
    """pytest on the package's own tests/ against the installed build, in the sandbox, after
    every graded case (it may write to the build's folder, which nothing reads after it).
    Reported for the student and the instructor, worth no points: the student wrote them."""
    test = TestResult(OWN_TESTS, 0.0, False, "", visibility="visible", tags=(OWN_TESTS, "report"))
    folder = os.path.join(source_dir, "tests")
    timeout = min(OWN_TESTS_TIMEOUT, deadline.left())
    pytest_env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [built.prefix, env.get("PYTHONPATH")]))}
    command = python_command("-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", "--color=no", folder)
    held = gpu_lock.acquire(False, lambda: deadline.passed) if gpu_lock is not None else None
    if gpu_lock is not None and held is None:
        test.output, test.not_run = deadline.not_run(), True
        return test
    try:  # they may use the GPU: in a batch, beside others' tests but never during a timing
        code, log = sandbox.run(command, timeout=min(timeout, deadline.left()), writable=[box], cwd=source_dir,
                                env=pytest_env, limits=Limits(cpu_seconds=int(timeout * CPUS) + 60))
    finally:
        if held is not None:
            held.release()
    if "No module named pytest" in log:
        test.output, test.not_run = "not run: pytest is not installed on the grading machine", True
        return test
    lines = log.strip().splitlines()
    # The student's own text, shown in the report: a bounded amount of it.
    outcomes = [line[:OWN_TESTS_LINE] for line in lines if line.startswith(("FAILED", "ERROR", "SKIPPED"))][:20]
    summary = lines[-1][:OWN_TESTS_LINE] if lines else "no output"
    if code is None:
        summary = f"stopped after {timeout:.0f} s"
    test.passed = code == 0
    test.output = "\n".join([f"your tests/ (reported, not graded): {summary}", *outcomes])
    return test


def _kept_answers(unit: Unit, answers: dict[str, str]) -> dict[str, str]:
    """The answers to the unit's own questions, each cut to MAX_ANSWER_CHARS: what the report
    carries of a notebook's answer cells, whatever their number and size."""
    known = {question.id for question in questions(unit)}
    return {key: answer_text(text)[:MAX_ANSWER_CHARS] for key, text in answers.items() if key in known}


def _written(unit: Unit, answers: dict[str, str]) -> list[TestResult]:
    """One entry per question of the lesson, for grading by hand, when the submission is a
    notebook (it carries answer cells). Worth 0 points here: the instructor gives them."""
    if not answers:
        return []
    entries = []
    for question in questions(unit):
        text = answer_text(answers.get(question.id, ""))
        entries.append(TestResult(f"written_{question.id}", 0.0, bool(text),
                                  text[:MAX_ANSWER_CHARS] if text else "no answer to grade: " + question.text,
                                  visibility="visible", tags=(WRITTEN, "manual")))
    return entries
