"""Grade a whole class on one machine: `python -m autograder grade-all`.

Each submission is graded by the one-submission command (`python -m autograder grade`) in a
process of its own, so one submission's crash, hang or lost CUDA context never reaches
another's grade. Workers ("slots") run side by side:

- builds: `jobs` slots, each compiling with MAX_JOBS = cores / jobs, and `jobs` bounded by the
  memory available (a compiler process can take MEMORY_PER_COMPILE_GB);
- GPUs: slot i always grades on GPU gpus[i % len(gpus)] (CUDA_VISIBLE_DEVICES), so each GPU
  has jobs / len(gpus) gradings at once;
- perf cases: where they run, a grading has two steps with one seed: every other case, then
  the perf cases with the cases they need, merged into one report. The class's first steps
  all end before the first perf step starts: a perf case, which must time alone on its GPU,
  then never waits for the long correctness and compute-sanitizer runs. The perf steps share
  each GPU through its lock (autograder/gpu_lock.py): their test processes together, each
  perf run alone. A perf step runs the build its first step kept (autograder/stored_build.py),
  rather than compile it again.

A submission whose hash and the grader's version match its last grading is skipped, unless
`regrade`. The queue starts with the submissions never graded, then the longest last
gradings. What each grading left (OUT/results/<id>/) is all the reports need
(autograder/gradebook.py).

Told to stop (SIGINT, SIGTERM), the batch starts no more gradings and passes SIGTERM to every
grading's process group (each runs in a session of its own, out of a terminal's reach), kills
what has not ended STOP_GRACE_S later, and records the gradings it stopped as failed: the next
run grades them again. A grading holds OUT/.locks/<id>.lock, and so do its processes, even past
the batch's own end: a second batch on the same OUT leaves that submission alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from autograder import compiler_cache, gradebook, precompiled_header
from autograder.collect import Submission
from autograder.machine import child_env, gpu_capability, gpu_probe_env, perf_runs_here
from autograder.reference import reference
from autograder.sandbox import CPUS
from autograder.untrusted_files import finite_number, is_regular_file, open_regular
from autograder.version import grader_version
from course.cases import needed
from course.spec.units import Unit
from course.written_whole import written_whole

MEMORY_PER_COMPILE_GB = 2.0  # nvcc's cicc on a large kernel file, with headroom
GRACE_S = 300  # past the grading's own time limit, before its process is killed
STOP_GRACE_S = 30  # for it to end its sandbox's processes once told to stop


def content_hash(path: str) -> str:
    """A digest of the submission's files. Only regular files are read: a named pipe would wait
    for ever, a link to a device read for ever (such a submission file: NotRegularFile, an OSError)."""
    digest = hashlib.sha256()
    if os.path.isdir(path):
        for root, folders, names in sorted(os.walk(path)):
            folders.sort()
            for name in sorted(names):
                full = os.path.join(root, name)
                if is_regular_file(full):
                    digest.update(os.fsencode(os.path.relpath(full, path)) + b"\0")  # any name, UTF-8 or not
                    with open_regular(full) as handle:
                        digest.update(handle.read())
    else:
        with open_regular(os.path.realpath(path)) as handle:  # a link the instructor made is followed
            digest.update(handle.read())
    return digest.hexdigest()[:16]


def parse_gpus(text: str) -> list[str]:
    """'all' (those CUDA_VISIBLE_DEVICES names where it is set, else every GPU nvidia-smi
    lists), 'none', or indices such as '0,1'."""
    if text == "none":
        return []
    if text == "all":
        if "CUDA_VISIBLE_DEVICES" in os.environ:  # the GPUs a scheduler such as Slurm gave this job
            return [gpu.strip() for gpu in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if gpu.strip()]
        try:
            listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            return []
        return [str(i) for i, line in enumerate(listing.splitlines()) if line.startswith("GPU ")]
    parts = text.split(",")
    if not all(part.strip().isdigit() for part in parts):
        raise ValueError(f"--gpus {text!r}: expected all, none or GPU indices separated by commas, such as 0,1")
    return [part.strip() for part in parts]


def worker_plan(jobs: int | None, gpus: list[str], cpus: int, memory_gb: float) -> tuple[int, int]:
    """(gradings at once, compiler processes each). By default a grading per two cores,
    at least one per GPU, and never more compilers than memory holds."""
    by_memory = max(1, int(memory_gb // MEMORY_PER_COMPILE_GB))
    if jobs is None:
        jobs = max(len(gpus), cpus // 2, 1)
    jobs = max(1, min(jobs, by_memory))
    return jobs, max(1, min(cpus // jobs, by_memory // jobs))


def slot_gpus(jobs: int, gpus: list[str]) -> list[str | None]:
    return [gpus[slot % len(gpus)] if gpus else None for slot in range(jobs)]


def available_memory_gb() -> float:
    """The memory this batch may use: the machine's available memory, or less where a cgroup
    limits it (a Slurm task's --mem), so that compilers are not killed for it."""
    try:
        with open("/proc/meminfo") as handle:
            fields = dict(line.split(":", 1) for line in handle)
        available = int(fields["MemAvailable"].split()[0]) / (1 << 20)
    except (OSError, KeyError, ValueError):
        available = 8.0
    limit = cgroup_memory_limit_gb()
    return min(available, limit) if limit is not None else available


def cgroup_memory_limit_gb(cgroups: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> float | None:
    """The memory limit of this process's cgroup (v2's memory.max, v1's memory.limit_in_bytes),
    in GB; None where there is none."""
    try:
        with open(cgroups) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(":", 2)  # hierarchy id : controllers : path
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if controllers == "":  # v2's single hierarchy
            limit_file = os.path.join(root, path.lstrip("/"), "memory.max")
        elif "memory" in controllers.split(","):
            limit_file = os.path.join(root, "memory", path.lstrip("/"), "memory.limit_in_bytes")
        else:
            continue
        try:
            with open(limit_file) as handle:
                text = handle.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # "max", or v1's huge number: no limit
            return int(text) / (1 << 30)
    return None


@dataclass
class Options:
    unit: Unit
    out: str
    sandbox: str = "auto"
    time_limit: float = 3600
    regrade: bool = False
    work: str | None = None
    cpu_only: bool = False  # grade no GPU case, even where GPUs are (each reported not run: no GPU)


def gpu_cases(unit: Unit) -> list[str]:
    """The unit's cases that need a GPU."""
    return [case.name for case in unit.tests(hidden=True).CASES if case.device.startswith("cuda")]


class Stop:
    """Whether the batch was told to stop, and the gradings' processes to pass it on to."""

    def __init__(self):
        self.signum: int | None = None
        self.at = 0.0
        self.lock = threading.Lock()
        self.processes: set[subprocess.Popen] = set()

    def __call__(self, signum, frame=None) -> None:
        """The signal handler: no new grading, and SIGTERM to every grading's group."""
        with self.lock:
            if self.signum is None:
                self.signum, self.at = signum, time.monotonic()
                print(f"\nstopping: {signal.Signals(signum).name}; ending the gradings in flight", file=sys.stderr)
            processes = list(self.processes)
        for process in processes:
            _signal_group(process, signal.SIGTERM)

    def started(self, process: subprocess.Popen) -> None:
        with self.lock:
            self.processes.add(process)
            stopped = self.signum is not None
        if stopped:  # started as the signal came
            _signal_group(process, signal.SIGTERM)

    def ended(self, process: subprocess.Popen) -> None:
        with self.lock:
            self.processes.discard(process)

    def overdue(self) -> bool:
        """Told to stop over STOP_GRACE_S ago: what still runs is killed."""
        return self.signum is not None and time.monotonic() - self.at > STOP_GRACE_S


STOP = Stop()  # one per process: signals reach the process, not a batch


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # its group may have ended with it
        os.killpg(process.pid, signum)


@contextlib.contextmanager
def _stoppable():
    """SIGINT and SIGTERM stop the batch (STOP) while the block runs, where signals can be
    handled (the main thread); the handlers before are put back after."""
    STOP.signum = None
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.signal(signum, STOP) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


class Claim:
    """OUT/.locks/<id>.lock, held while a grading of the submission runs: by the batch, and by
    each of its grading processes (an inherited descriptor), so a batch killed outright still
    holds it until they end."""

    def __init__(self, out: str, submission_id: str):
        os.makedirs(os.path.join(out, ".locks"), exist_ok=True)
        self.fd: int | None = os.open(
            os.path.join(out, ".locks", submission_id + ".lock"), os.O_RDWR | os.O_CREAT, 0o600
        )
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.release()
        except OSError:  # a filesystem without locks (some network ones): grade unguarded
            pass

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Progress:
    """One line: counts, an ETA from the gradings done so far (skips cost nothing), and the
    submissions in flight; printed as each grading starts and ends."""

    IN_FLIGHT_SHOWN = 4

    def __init__(self, total: int, stream=None, label: str = ""):
        self.total, self.stream, self.start = total, stream or sys.stderr, time.monotonic()
        self.label = label
        self.graded = self.skipped = self.failed = self.busy = 0
        self.in_flight: list[str] = []
        self.stopped: int | None = None  # the signal that stopped the batch
        self.lock = threading.Lock()

    def line(self) -> str:
        done = self.graded + self.skipped + self.failed + self.busy
        elapsed = time.monotonic() - self.start
        worked = self.graded + self.failed
        eta = elapsed / worked * (self.total - done) if worked else None
        busy = f", held by another batch {self.busy}" if self.busy else ""
        flying = ", ".join(self.in_flight[: self.IN_FLIGHT_SHOWN])
        flying += (
            f" and {len(self.in_flight) - self.IN_FLIGHT_SHOWN} more"
            if len(self.in_flight) > self.IN_FLIGHT_SHOWN
            else ""
        )
        return (
            f"{self.label}[{done}/{self.total}] graded {self.graded}, unchanged {self.skipped}, grader failed "
            f"{self.failed}{busy} | {elapsed / 60:.1f} min"
            + (f", ETA {eta / 60:.1f} min" if eta is not None else "")
            + (f" | grading: {flying}" if flying else "")
        )

    def started(self, submission_id: str) -> None:
        with self.lock:
            self.in_flight.append(submission_id)
            self._print()

    def count(self, outcome: str, submission_id: str | None = None) -> None:
        with self.lock:
            setattr(self, outcome, getattr(self, outcome) + 1)
            if submission_id in self.in_flight:
                self.in_flight.remove(submission_id)
            self._print()

    def _print(self) -> None:
        end = "\r" if self.stream.isatty() else "\n"
        print(self.line(), end=end, file=self.stream, flush=True)


def _grade_command(submission: str, options: Options, out: str, seed: int, tests: list[str]) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        submission,
        "--unit",
        options.unit.name,
        "--out",
        out,
        "--seed",
        str(seed),
        "--sandbox",
        options.sandbox,
        "--time-limit",
        str(options.time_limit),
    ]
    command += ["--work", options.work] if options.work else []
    return command + [arg for name in tests for arg in ("--tests", name)]


def _run_grading(
    command: list[str], env: dict, log_path: str, timeout: float, pass_fds: tuple[int, ...] = ()
) -> str | None:
    """None when the grading wrote its results, else why not. `pass_fds`: descriptors it keeps
    (its submission's Claim)."""
    with open(log_path, "a", encoding="utf-8") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, pass_fds=pass_fds
        )
        STOP.started(process)
        try:
            code = _wait(process, time.monotonic() + timeout)
        finally:
            STOP.ended(process)
    if STOP.signum is not None:
        return _stopped()
    if code is None:
        return f"the grading process ran past {timeout:.0f} s and was killed"
    return None if code == 0 else f"the grading process exited with status {code} (see grade.log)"


def _wait(process: subprocess.Popen, deadline: float) -> int | None:
    """Its exit status; None where it ran past the deadline, and was told to stop (SIGTERM: it ends
    its sandbox's processes, out of this group's reach), then killed with its group."""
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return process.wait(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
        if STOP.overdue():
            break
        if time.monotonic() >= deadline and STOP.signum is None:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=STOP_GRACE_S)
            break
    _signal_group(process, signal.SIGKILL)
    process.wait()
    return None


def perf_split(unit: Unit) -> tuple[list[str], list[str]]:
    """(every case that is not a perf case, the perf cases with the cases they need)."""
    cases = unit.tests(hidden=True).CASES
    perf = [case for case in cases if case.kind == "perf"]
    others = [case.name for case in cases if case.kind != "perf"]
    timed = {name for case in perf for name in [case.name, *needed(case, cases)]}
    return others, [case.name for case in cases if case.name in timed]


def merge_perf(first: dict, timed: dict, perf_names: set[str]) -> dict:
    """The first step's results with the perf tests (and their measurements) of the second."""
    tests = first["tests"] + [test for test in timed["tests"] if test["name"] in perf_names]
    merged = {**first, "tests": tests, "score": round(sum(test["score"] for test in tests), 2)}
    merged["extra_data"] = {
        **first["extra_data"],
        "perf": timed["extra_data"].get("perf", {}),
        "timings": _added(first["extra_data"].get("timings", {}), timed["extra_data"].get("timings", {})),
    }
    merged["execution_time"] = round(first.get("execution_time", 0) + timed.get("execution_time", 0), 1)
    return merged


def _added(first: dict, second: dict) -> dict:
    """Two steps' timings, key by key (a grading's time is both steps')."""
    return {key: first.get(key, 0.0) + second.get(key, 0.0) for key in {**first, **second}}


class Grading:
    """One submission's grading into OUT/results/<id>/, in one step or, where perf cases run,
    two: every other case, then (once the whole class had its first step) the perf cases with
    the cases they need, with the same seed, merged into one results.json."""

    def __init__(
        self,
        submission: Submission,
        options: Options,
        version: str,
        steps: tuple[list[str], list[str]],
        share: dict[str, str],
        builds: str,
    ):
        """`share`: the variables its environment gets: its share of the machine (compilers, CPU
        threads), and where its builds find a precompiled header (CPATH).
        `builds`: the batch's private folder where a first step keeps its build for the perf step."""
        self.submission, self.options, self.version, self.share = submission, options, version, share
        self.others, self.timed = steps
        self.kept_build = os.path.join(builds, submission.id)
        self.folder = os.path.join(options.out, gradebook.RESULTS, submission.id)
        self.state_path = os.path.join(self.folder, gradebook.STATE)
        self.digest = ""  # of its content, read when its grading starts
        self.seed, self.seconds, self.gpus = secrets.randbits(62), [], []  # per step
        self.error: str | None = None
        self.claim: Claim | None = None
        self.finished = False  # its record written

    def claimed(self) -> bool:
        """Whether this batch may grade it: no other live grading holds it."""
        self.claim = Claim(self.options.out, self.submission.id)
        return self.claim.fd is not None

    def release(self) -> None:
        if self.claim:
            self.claim.release()

    def unchanged(self) -> bool:
        """Graded before, by this grader version, with this content. Its record then gets who
        handed it in and the notes on it as collected now (a roster or a second hand-in since)."""
        self.digest = content_hash(self.submission.path)
        if self.options.regrade or not os.path.exists(self.state_path):
            return False
        last = gradebook.record(self.options.out, self.submission.id)  # a damaged record: grade it again
        same = last.results is not None and (last.state.get("hash"), last.state.get("grader_version")) == (
            self.digest,
            self.version,
        )
        if same:
            state, now = _read_json(self.state_path), self._collected()
            if any(state.get(key) != value for key, value in now.items()):
                _write_json({**state, **now}, self.state_path)
        return same

    def _collected(self) -> dict:
        """What its record says of the hand-in as collected."""
        return {
            "submission": self.submission.path,
            "students": [vars(s) for s in self.submission.students],
            "notes": list(self.submission.notes),
            "handed_in": self.submission.handed_in,
            "unit": self.options.unit.name,
        }

    def first_step(self, gpu: str | None) -> str:
        shutil.rmtree(self.folder, ignore_errors=True)
        os.makedirs(self.folder)
        keep = ["--keep-build", self.kept_build] if self.timed else []
        self.error = self._run(self.folder, self.others if self.timed else [], gpu, keep)
        return self.finish() if self.error or not self.timed else "first step done"

    def perf_step(self, gpu: str | None, gpu_lock: str | None) -> str:
        timed_dir = os.path.join(self.folder, "perf_step")
        batch_only = ["--gpu-lock", gpu_lock] if gpu_lock else []
        batch_only += ["--no-own-tests", "--prebuilt", self.kept_build]
        self.error = self._run(timed_dir, self.timed, gpu, batch_only)
        shutil.rmtree(self.kept_build, ignore_errors=True)
        if not self.error:
            try:
                first, second = (_read_json(os.path.join(d, "results.json")) for d in (self.folder, timed_dir))
                merged = merge_perf(first, second, set(self.timed) - set(self.others))
            except (OSError, ValueError, KeyError, TypeError) as error:
                self.error = f"the two steps' reports could not be merged: {type(error).__name__}: {error}"
            else:
                _write_json(merged, os.path.join(self.folder, "results.json"))
        return self.finish()

    def _run(self, out: str, tests: list[str], gpu: str | None, step_options: list[str]) -> str | None:
        env = {**os.environ, **self.share}
        if gpu is not None:
            env.update(CUDA_VISIBLE_DEVICES=gpu, **gpu_probe_env(gpu))
        command = _grade_command(self.submission.path, self.options, out, self.seed, tests) + step_options
        start = time.monotonic()
        error = _run_grading(
            command,
            env,
            os.path.join(self.folder, "grade.log"),
            self.options.time_limit + GRACE_S,
            pass_fds=(self.claim.fd,) if self.claim and self.claim.fd is not None else (),
        )
        self.seconds.append(round(time.monotonic() - start, 1))
        self.gpus.append(gpu)
        return error

    def finish(self) -> str:
        """Feedback and grading.json; 'graded' or 'failed'."""
        self.finished = True
        results_path = os.path.join(self.folder, "results.json")
        if not self.error and os.path.exists(results_path):
            try:
                feedback = gradebook.feedback_text(_read_json(results_path))
            except (OSError, ValueError, KeyError, TypeError) as error:
                self.error = f"its results.json could not be read: {type(error).__name__}: {error}"
            else:
                path = os.path.join(self.folder, "feedback.txt")
                with written_whole(path) as temporary, open(temporary, "w", encoding="utf-8") as handle:
                    handle.write(feedback)
        elif not self.error:
            self.error = "the grading wrote no results.json"
        _write_json(
            {
                **self._collected(),
                "hash": self.digest,
                "grader_version": self.version,
                "status": "failed" if self.error else "graded",
                "error": self.error,
                "gpu": self.gpus[0] if self.gpus else None,
                "perf_gpu": self.gpus[1] if len(self.gpus) > 1 else None,
                "seed": self.seed,
                "seconds": round(sum(self.seconds), 1),
                "step_seconds": self.seconds,
            },
            self.state_path,
        )
        return "failed" if self.error else "graded"


def _read_json(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _write_json(data: dict, path: str) -> None:
    with written_whole(path) as temporary, open(temporary, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)


def prepare_reference(unit: Unit, gpus: list[str]) -> str:
    """Build the unit's reference into its cache before any grading starts, where its perf
    cases will run here: otherwise the first gradings would each wait for it, and time nothing
    meanwhile. '' when done or not needed, else why it failed (each grading then says so too)."""
    if not perf_runs_here(unit.tests(hidden=True).CASES, bool(gpus)):
        return ""
    try:  # in the environment the gradings will build it in
        reference(unit, child_env(gpu_capability() if gpus else None))
    except Exception as error:
        return f"the reference solution could not be built: {type(error).__name__}: {error}"
    return ""


def grade_all(
    submissions: list[Submission], options: Options, gpus: list[str], jobs: int | None = None, cpus: int | None = None
) -> Progress:
    """Grade every submission; slots pull from one queue, each on its own GPU. Where perf cases
    run, every submission's other cases are graded first, then its perf cases: a perf case
    then waits only for other perf steps' runs, never for the class's long correctness and
    compute-sanitizer runs, and each times alone on its GPU (autograder/gpu_lock.py)."""
    cpus = cpus or CPUS
    gpus = [] if options.cpu_only else gpus
    jobs, max_jobs = worker_plan(jobs, gpus, cpus, available_memory_gb())
    version = grader_version(options.unit)
    timed_here = perf_runs_here(options.unit.tests(hidden=True).CASES, bool(gpus))
    # torch's CPU ops (inputs, references, the CPU cases) use every core by default: with a
    # grading per two cores, each gets its share, or their threads fight over the cores.
    share = {"MAX_JOBS": str(max_jobs), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(max(1, cpus // jobs)))}
    if options.cpu_only:  # the gradings see no GPU: their GPU cases are reported not run
        share["CUDA_VISIBLE_DEVICES"] = ""
    # The gradings' C++ compiles parse their first header once between them, where asked
    # (README, Instructors).
    making = None
    if os.environ.get("COURSE_PRECOMPILED_HEADERS") and submissions:
        where, making = precompiled_header.start(os.environ["COURSE_PRECOMPILED_HEADERS"])
        if where:
            share["CPATH"] = precompiled_header.on_cpath(where, os.environ.get("CPATH", ""))
    problem = prepare_reference(options.unit, gpus) if submissions else ""
    if problem:
        print(f"warning: {problem}", file=sys.stderr)
    if submissions and compiler_cache.enabled(os.environ):  # the files students leave as given, compiled once
        for problem in compiler_cache.warm(options.unit, {**child_env(gpu_capability() if gpus else None), **share}):
            print(f"warning: the compiler cache was not warmed: {problem}", file=sys.stderr)
    steps = perf_split(options.unit) if timed_here else ([], [])
    # This machine's own disk (a Slurm job's OUT may be on a network filesystem), private to the
    # grader: the GPUs' locks, and the builds kept between a grading's two steps.
    private = tempfile.mkdtemp(prefix="grade-all-")
    os.makedirs(os.path.join(private, "builds"))
    try:
        with _stoppable():
            return _grade_all(submissions, options, gpus, jobs, max_jobs, version, steps, share, private)
    finally:
        precompiled_header.stop(making)
        shutil.rmtree(private, ignore_errors=True)


def _grade_all(
    submissions: list[Submission],
    options: Options,
    gpus: list[str],
    jobs: int,
    max_jobs: int,
    version: str,
    steps: tuple[list[str], list[str]],
    share: dict[str, str],
    private: str,
) -> Progress:
    timed_here = bool(steps[1])
    gradings = [
        Grading(submission, options, version, steps, share, os.path.join(private, "builds"))
        for submission in submissions
    ]
    gradings.sort(key=lambda grading: _last_seconds(options.out, grading.submission.id), reverse=True)
    print(
        f"grading {len(submissions)} submissions of {options.unit.name}: {jobs} at once, {max_jobs} compiler "
        f"processes each, GPUs: {', '.join(gpus) or 'none'}" + (", perf cases last" if timed_here else ""),
        file=sys.stderr,
    )
    progress = Progress(len(submissions), label="other cases " if timed_here else "")
    to_time: list[Grading] = []
    _in_slots(jobs, gpus, gradings, lambda grading, gpu: _first_step(grading, gpu, progress, to_time))
    if to_time:
        perf_progress = Progress(len(to_time), label="perf cases ")
        locks = {gpu: os.path.join(private, f"gpu{gpu}") for gpu in gpus}
        _in_slots(jobs, gpus, to_time, lambda grading, gpu: _perf_step(grading, gpu, locks.get(gpu), perf_progress))
        for grading in (g for g in to_time if not g.finished):  # stopped before its perf step
            grading.error = _stopped()
            perf_progress.failed += grading.finish() == "failed"
            grading.release()
        progress.graded -= perf_progress.failed  # a perf step that failed fails its grading
        progress.failed += perf_progress.failed
    progress.stopped = STOP.signum
    return progress


def _stopped() -> str:
    return f"stopped by {signal.Signals(STOP.signum).name} before it ended: the next run grades it again"


def _first_step(grading: Grading, gpu: str | None, progress: Progress, to_time: list[Grading]) -> None:
    """Its first (or only) step, unless unchanged or another live grading holds it; a grading
    with a perf step to come keeps its claim for it."""
    if not grading.claimed():
        print(
            f"warning: {grading.submission.id}: another grading of it is running (a batch still at work, or "
            f"its processes): left as it is",
            file=sys.stderr,
        )
        progress.count("busy")
        return
    progress.started(grading.submission.id)
    outcome = _guarded(grading, lambda: "skipped" if grading.unchanged() else grading.first_step(gpu))
    if outcome == "first step done":
        to_time.append(grading)
        outcome = "graded"
    else:
        grading.release()
    progress.count(outcome, grading.submission.id)


def _perf_step(grading: Grading, gpu: str | None, gpu_lock: str | None, progress: Progress) -> None:
    progress.started(grading.submission.id)
    try:
        progress.count(_guarded(grading, lambda: grading.perf_step(gpu, gpu_lock)), grading.submission.id)
    finally:
        grading.release()


def _last_seconds(out: str, submission_id: str) -> float:
    """How long its last grading took; infinity where none is on record. The queue starts with
    the longest (those never timed first, in the order given): graded again, a class then ends
    with its short gradings, not with one long grading holding the batch while the rest is done."""
    seconds = gradebook.record(out, submission_id).state.get("seconds")
    return float(seconds) if finite_number(seconds) else float("inf")


def _guarded(grading: Grading, step) -> str:
    """step()'s outcome, or 'failed' where the grader itself failed on this submission: the
    rest of the class is graded all the same."""
    try:
        return step()
    except Exception as error:
        print(f"warning: {grading.submission.id}: the grader failed: {type(error).__name__}: {error}", file=sys.stderr)
        grading.error = f"the grader failed on it: {type(error).__name__}: {error}"
        try:  # its record says so: the gradebook lists it as failed, and no earlier grade stands
            os.makedirs(grading.folder, exist_ok=True)
            grading.finish()
        except Exception as again:
            print(f"warning: {grading.submission.id}: its failure could not be recorded: {again}", file=sys.stderr)
        return "failed"


def _in_slots(jobs: int, gpus: list[str], items: list, work) -> None:
    """work(item, gpu) for every item, `jobs` at a time, slot k always on GPU gpus[k % len(gpus)]."""
    pending: queue.Queue = queue.Queue()
    for item in items:
        pending.put(item)

    def slot(gpu: str | None) -> None:
        while STOP.signum is None:  # told to stop: no new grading
            try:
                item = pending.get_nowait()
            except queue.Empty:
                return
            work(item, gpu)

    threads = [threading.Thread(target=slot, args=(gpu,)) for gpu in slot_gpus(jobs, gpus)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
