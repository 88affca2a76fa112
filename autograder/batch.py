"""Grade a whole class on one machine: `python -m autograder grade-all`.

Each submission is graded by the one-submission command (`python -m autograder grade`) in a
process of its own, so one submission's crash, hang or lost CUDA context never reaches
another's grade. Workers ("slots") run side by side:

- builds: `jobs` slots, each compiling with MAX_JOBS = cores / jobs, and `jobs` bounded by the
  memory available (a compiler process can take MEMORY_PER_COMPILE_GB);
- GPUs: slot i always grades on GPU gpus[i % len(gpus)] (CUDA_VISIBLE_DEVICES), so each GPU
  has jobs / len(gpus) gradings at once;
- perf cases: each GPU has a lock (autograder/gpu_lock.py) that the gradings' test processes
  take shared, and a perf run alone: nothing else of this batch runs on a GPU while it times.

A submission whose hash and the grader's version match its last grading is skipped, unless
`regrade`. What each grading left (OUT/results/<id>/) is all the reports need
(autograder/gradebook.py).
"""
from __future__ import annotations

import hashlib
import json
import os
import queue
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from autograder import gradebook
from autograder.collect import Submission
from autograder.grade import child_env, gpu_capability, perf_runs_here
from autograder.reference import reference
from autograder.version import grader_version
from course.authoring.units import Unit

MEMORY_PER_COMPILE_GB = 2.0  # nvcc's cicc on a large kernel file, with headroom
GRACE_S = 300                # past the grading's own time limit, before its process is killed


def content_hash(path: str) -> str:
    digest = hashlib.sha256()
    if os.path.isdir(path):
        for root, folders, names in sorted(os.walk(path)):
            folders.sort()
            for name in sorted(names):
                full = os.path.join(root, name)
                if not os.path.islink(full):
                    digest.update(os.path.relpath(full, path).encode() + b"\0")
                    with open(full, "rb") as handle:
                        digest.update(handle.read())
    else:
        with open(path, "rb") as handle:
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
    try:
        with open("/proc/meminfo") as handle:
            fields = dict(line.split(":", 1) for line in handle)
        return int(fields["MemAvailable"].split()[0]) / (1 << 20)
    except (OSError, KeyError, ValueError):
        return 8.0


@dataclass
class Options:
    unit: Unit
    out: str
    sandbox: str = "auto"
    time_limit: float = 3600
    regrade: bool = False
    work: str | None = None


class Progress:
    """One line: counts and an ETA from the gradings done so far (skips cost nothing)."""

    def __init__(self, total: int, stream=None):
        self.total, self.stream, self.start = total, stream or sys.stderr, time.monotonic()
        self.graded = self.skipped = self.failed = 0
        self.lock = threading.Lock()

    def line(self) -> str:
        done = self.graded + self.skipped + self.failed
        elapsed = time.monotonic() - self.start
        worked = self.graded + self.failed
        eta = elapsed / worked * (self.total - done) if worked else None
        return (f"[{done}/{self.total}] graded {self.graded}, unchanged {self.skipped}, grader failed "
                f"{self.failed} | {elapsed / 60:.1f} min" + (f", ETA {eta / 60:.1f} min" if eta is not None else ""))

    def count(self, outcome: str) -> None:
        with self.lock:
            setattr(self, outcome, getattr(self, outcome) + 1)
            end = "\r" if self.stream.isatty() else "\n"
            print(self.line(), end=end, file=self.stream, flush=True)


def _grade_command(submission: str, options: Options, out: str, seed: int) -> list[str]:
    command = [sys.executable, "-m", "autograder", "grade", submission, "--unit", options.unit.name, "--out", out,
               "--seed", str(seed), "--sandbox", options.sandbox, "--time-limit", str(options.time_limit)]
    return command + (["--work", options.work] if options.work else [])


def _run_grading(command: list[str], env: dict, log_path: str, timeout: float) -> str | None:
    """None when the grading wrote its results, else why not."""
    with open(log_path, "a", encoding="utf-8") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            return f"the grading process ran past {timeout:.0f} s and was killed"
    return None if code == 0 else f"the grading process exited with status {code} (see grade.log)"


def grade_one(submission: Submission, options: Options, version: str, gpu: str | None, max_jobs: int,
              gpu_lock: str | None) -> str:
    """Grade one submission into OUT/results/<id>/; return 'graded', 'skipped' or 'failed'."""
    folder = os.path.join(options.out, gradebook.RESULTS, submission.id)
    state_path = os.path.join(folder, gradebook.STATE)
    digest = content_hash(submission.path)
    if not options.regrade and os.path.exists(state_path):
        with open(state_path, encoding="utf-8") as handle:
            last = json.load(handle)
        if last.get("status") == "graded" and (last.get("hash"), last.get("grader_version")) == (digest, version):
            return "skipped"
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    env = {**os.environ, "MAX_JOBS": str(max_jobs)}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    seed, start, log = secrets.randbits(62), time.monotonic(), os.path.join(folder, "grade.log")
    command = _grade_command(submission.path, options, folder, seed)
    command += ["--gpu-lock", gpu_lock] if gpu_lock else []
    error = _run_grading(command, env, log, options.time_limit + GRACE_S)
    results_path = os.path.join(folder, "results.json")
    if not error and os.path.exists(results_path):
        with open(results_path, encoding="utf-8") as handle:
            feedback = gradebook.feedback_text(json.load(handle))
        with open(os.path.join(folder, "feedback.txt"), "w", encoding="utf-8") as handle:
            handle.write(feedback)
    elif not error:
        error = "the grading wrote no results.json"
    _write_json({"submission": submission.path, "students": [vars(s) for s in submission.students],
                 "hash": digest, "grader_version": version, "status": "failed" if error else "graded",
                 "error": error, "gpu": gpu, "seed": seed, "seconds": round(time.monotonic() - start, 1)}, state_path)
    return "failed" if error else "graded"


def _write_json(data: dict, path: str) -> None:
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
    os.replace(temporary, path)


def prepare_reference(unit: Unit, gpus: list[str]) -> str:
    """Build the unit's reference into its cache before any grading starts, where its perf
    cases will run here: otherwise the first gradings would each wait for it, and time nothing
    meanwhile. '' when done or not needed, else why it failed (each grading then says so too)."""
    if not perf_runs_here(unit.tests(hidden=True).CASES, bool(gpus)):
        return ""
    try:  # in the environment the gradings will build it in
        reference(unit, child_env(gpu_capability() if gpus else None))
    except Exception as error:  # noqa: BLE001 - the gradings report it, case by case
        return f"the reference solution could not be built: {type(error).__name__}: {error}"
    return ""


def grade_all(submissions: list[Submission], options: Options, gpus: list[str], jobs: int | None = None,
              cpus: int | None = None) -> Progress:
    """Grade every submission; slots pull from one queue, each on its own GPU."""
    jobs, max_jobs = worker_plan(jobs, gpus, cpus or len(os.sched_getaffinity(0)), available_memory_gb())
    version = grader_version(options.unit)
    problem = prepare_reference(options.unit, gpus) if submissions else ""
    if problem:
        print(f"warning: {problem}", file=sys.stderr)
    # On this machine's disk (a Slurm job's OUT may be on a network filesystem): one lock per GPU.
    lock_folder = tempfile.mkdtemp(prefix="grade-all-gpu-locks-")
    locks = {gpu: os.path.join(lock_folder, f"gpu{gpu}") for gpu in gpus}
    pending: queue.Queue = queue.Queue()
    for submission in submissions:
        pending.put(submission)
    progress = Progress(len(submissions))
    print(f"grading {len(submissions)} submissions of {options.unit.name}: {jobs} at once, {max_jobs} compiler "
          f"processes each, GPUs: {', '.join(gpus) or 'none'}", file=sys.stderr)

    def slot(gpu: str | None) -> None:
        while True:
            try:
                submission = pending.get_nowait()
            except queue.Empty:
                return
            progress.count(grade_one(submission, options, version, gpu, max_jobs, locks.get(gpu)))

    threads = [threading.Thread(target=slot, args=(gpu,)) for gpu in slot_gpus(jobs, gpus)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        shutil.rmtree(lock_folder, ignore_errors=True)
    return progress
