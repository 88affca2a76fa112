"""grade-all over a small class of day01 (CPU paths): a Gradescope export of reference copies
as a zip, a folder and a notebook, a mutant, and an unreadable zip. Its gradebook shows each
its expected score, a second run grades nothing again, and two fake GPUs share the work. Then
the batch's steps and its GPU lock: runs share a GPU, a timing runs alone, and a test process
loads student code only once it holds the lock. Then, with gradings faked, a messy class folder
(a name that is not UTF-8, two hand-ins of one student, a roster, --only, a removed hand-in),
no GPU without --cpu-only, the progress line, signals passed on to every grading's processes,
and a submission another live grading holds."""

import csv
import fcntl
import glob
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from autograder import batch, collect, gradebook
from autograder.__main__ import main
from autograder.deadline import Deadline
from autograder.gpu_lock import GpuLock
from autograder.machine import GPU_PROBE_ENV, child_env
from autograder.runner import GroupRunner
from autograder.sandbox import Sandbox
from course.cases import make_input_sets
from course.spec import mutants, units
from course.spec.units import REPO

UNIT = units.load("day01_relu_bias")
MUTANT = mutants.load(UNIT)["gradient_not_masked"]  # a .py edit: no compile beyond the reference's
STUDENTS = {
    "submission_1": [("Ada Lovelace", "ada@example.edu", "1001"), ("Alan Turing", "alan@example.edu", "1002")],
    "submission_2": [("Grace Hopper", "grace@example.edu", "1003")],
    "submission_3": [("Edsger Dijkstra", "edsger@example.edu", "1004")],
    "submission_4": [("Barbara Liskov", "barbara@example.edu", "1005")],
    "submission_5": [("Donald Knuth", "donald@example.edu", "1006")],
}


def _zip(folder, path):
    with zipfile.ZipFile(path, "w") as archive:
        for file in UNIT.files:
            archive.write(folder / file, file)


def _export(root):
    """A Gradescope bulk export: a folder per submission and submission_metadata.yml."""
    UNIT.write("solution", str(root / "reference"))
    mutants.write(UNIT, MUTANT, str(root / "mutant"))
    export = root / "export"
    for key in STUDENTS:
        (export / key).mkdir(parents=True)
    _zip(root / "reference", export / "submission_1" / "submission_day01_relu_bias.zip")
    shutil.copytree(root / "reference", export / "submission_2" / "sources")
    shutil.copy(f"{REPO}/notebooks/instructor/{UNIT.name}.ipynb", export / "submission_3" / "day01.ipynb")
    _zip(root / "mutant", export / "submission_4" / "handin.zip")
    (export / "submission_5" / "handin.zip").write_bytes(b"not a zip")
    lines = []
    for key, people in STUDENTS.items():
        lines += [f"{key}:", "  :submitters:"]
        lines += [f"  - :name: {name}\n    :email: {email}\n    :sid: '{sid}'" for name, email, sid in people]
        lines += ["  :created_at: 2031-01-01 12:00:00.000000000 -05:00", "  :score: 0.0"]
    (export / collect.METADATA).write_text("\n".join(lines) + "\n")
    return export


def _gradebook(out):
    with open(out / "gradebook.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_class_graded_resumed_and_split_over_two_gpus(tmp_path, capsys):
    export, out = _export(tmp_path), tmp_path / "out"
    args = [
        "grade-all",
        str(export),
        "--unit",
        UNIT.name,
        "--out",
        str(out),
        "--gpus",
        "0,1",
        "--jobs",
        "2",
        "--anonymise",
    ]
    assert main(args) == 0
    rows = _gradebook(out)
    assert [r["Email"] for r in rows] == [e for people in STUDENTS.values() for _, e, _ in people]
    assert list(rows[0])[:4] == gradebook.UPLOAD_COLUMNS and "cpu_values" in rows[0]
    score = {r["Submission"]: float(r["Total Score"]) for r in rows}

    reference = json.loads((out / "results" / "submission_1" / "results.json").read_text())
    ran = [t["name"] for t in reference["tests"] if not t["output"].startswith("not run")]
    assert all(t["status"] == "passed" for t in reference["tests"] if t["name"] in ran)
    assert score["submission_1"] == score["submission_2"] == score["submission_3"] == reference["score"] > 1
    lost = MUTANT.expected_losses(ran)
    assert lost and score["submission_4"] == pytest.approx(
        reference["score"] - sum(t["max_score"] for t in reference["tests"] if t["name"] in lost)
    )
    assert score["submission_5"] == 0

    states = [json.loads(p.read_text()) for p in sorted(out.glob(f"results/*/{gradebook.STATE}"))]
    assert {s["gpu"] for s in states} == {"0", "1"}  # both fake GPUs had gradings
    assert "FAILED" in (out / "results" / "submission_4" / "feedback.txt").read_text()
    failures = (out / "failures.md").read_text()
    assert all(f"`{name}` | 1 of 5" in failures for name in lost) and "`build` | 1 of 5" in failures
    assert "| `build` |" in (out / "grading_time.md").read_text()  # each test timed in every grading
    board = (out / "leaderboard.md").read_text() + (out / "leaderboard.html").read_text()
    assert "anon-" in board and not any(name in board for people in STUDENTS.values() for name, _, _ in people)
    assert "[5/5]" in capsys.readouterr().err  # the progress line

    # Again: nothing changed, nothing graded. Then one hand-in changes: only it is graded.
    assert main(args) == 0
    assert "unchanged 5" in capsys.readouterr().err
    (export / "submission_5" / "handin.zip").write_bytes(b"still not a zip")
    assert main(args) == 0
    assert "graded 1, unchanged 4" in capsys.readouterr().err


def test_a_folder_of_hand_ins_is_read_by_name(tmp_path):
    UNIT.write("solution", str(tmp_path / "class" / "bob"))
    _zip(tmp_path / "class" / "bob", tmp_path / "class" / "alice.zip")
    (tmp_path / "class" / "alice.ipynb").write_text("{}")
    os.utime(tmp_path / "class" / "alice.ipynb", (0, 0))  # older: the zip is graded
    (tmp_path / "class" / "notes.txt").write_text("not a hand-in")
    found = collect.collect(str(tmp_path / "class"), UNIT)
    assert [(s.id, s.students[0].name) for s in found] == [("alice", "alice"), ("bob", "bob")]
    assert found[0].path == str(tmp_path / "class" / "alice.zip")
    with pytest.raises(ValueError, match="SUBMISSIONS"):
        collect.collect(str(tmp_path / "absent"), UNIT)


@pytest.mark.parametrize(
    "cgroup, limit_file, text, gb",
    [
        ("0::/slurm/job_7/step_0\n", "slurm/job_7/step_0/memory.max", "17179869184\n", 16.0),
        ("0::/slurm/job_7/step_0\n", "slurm/job_7/step_0/memory.max", "max\n", None),
        ("4:memory:/slurm/uid_0/job_7\n3:cpu:/\n", "memory/slurm/uid_0/job_7/memory.limit_in_bytes", "8589934592", 8.0),
        ("4:memory:/\n", "memory/memory.limit_in_bytes", "9223372036854771712", None),
    ],
)
def test_a_cgroups_memory_limit_bounds_the_batch(tmp_path, cgroup, limit_file, text, gb):
    """A Slurm task's --mem is a cgroup limit, lower than what the node has free: compilers are
    sized to it (cgroup v2 and v1; no limit where it says max or a v1 'unlimited')."""
    (tmp_path / "cgroup").write_text(cgroup)
    (tmp_path / "fs" / limit_file).parent.mkdir(parents=True)
    (tmp_path / "fs" / limit_file).write_text(text)
    assert batch.cgroup_memory_limit_gb(str(tmp_path / "cgroup"), str(tmp_path / "fs")) == gb


def test_a_grading_counts_only_the_cores_it_may_run_on():
    """Under taskset (or a Slurm task's cpuset) a lone grading's compilers and CPU-time limits
    follow the cores it was given, not the machine's."""
    script = (
        "import os; os.environ.pop('MAX_JOBS', None); from autograder.machine import child_env; "
        "from autograder.sandbox import CPUS; print(CPUS, child_env(None)['MAX_JOBS'])"
    )
    env = {k: v for k, v in os.environ.items() if k != "MAX_JOBS"}
    out = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", script],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["1", "1"]


def test_a_grading_past_its_time_is_told_to_stop_before_it_is_killed(tmp_path, monkeypatch):
    """SIGTERM first: the grading ends its sandbox's processes, which its group does not hold."""
    monkeypatch.setattr(batch, "STOP_GRACE_S", 20)
    stopped = tmp_path / "stopped"
    code = (
        f"import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *_: (open({str(stopped)!r}, 'w').close(), sys.exit(143)))\n"
        f"time.sleep(100)\n"
    )
    start = time.time()
    why = batch._run_grading([sys.executable, "-c", code], dict(os.environ), str(tmp_path / "grade.log"), 5)
    assert why == "the grading process ran past 5 s and was killed" and stopped.exists()
    assert time.time() - start < 5 + 10  # it ended when told, not at the end of the grace


def test_workers_bounded_by_cores_memory_and_spread_over_gpus():
    assert batch.worker_plan(None, ["0"] * 8, cpus=16, memory_gb=128) == (8, 2)
    assert batch.worker_plan(None, [], cpus=2, memory_gb=64) == (1, 2)
    assert batch.worker_plan(16, ["0"], cpus=16, memory_gb=9) == (4, 1)  # memory holds 4 compilers
    assert batch.slot_gpus(6, ["0", "1"]) == ["0", "1", "0", "1", "0", "1"]
    assert batch.slot_gpus(2, []) == [None, None]
    assert batch.parse_gpus("0, 3") == ["0", "3"]
    with pytest.raises(ValueError, match="--gpus"):
        batch.parse_gpus("first")


def _wait_until_held(path: str) -> None:
    """Until another open file holds the lock file at `path` (a waiting timer, its turnstile)."""
    handle = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        for _ in range(500):
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle, fcntl.LOCK_UN)
            except BlockingIOError:
                return
            time.sleep(0.02)
        raise AssertionError(f"nothing took {path} in 10 s")
    finally:
        os.close(handle)


def test_gpu_lock_lets_runs_share_and_a_timer_run_alone(tmp_path):
    """Runs share the GPU; a timer waits for them, and a run that comes after the timer waits
    for it (it is not starved by a stream of runs)."""
    lock = GpuLock(str(tmp_path / "gpu0"))
    never = lambda: False  # noqa: E731
    first, second = lock.acquire(False, never), lock.acquire(False, never)
    assert first and second  # shared
    timer: list = []
    waiter = threading.Thread(target=lambda: timer.append(lock.acquire(True, never)))
    waiter.start()
    _wait_until_held(str(tmp_path / "gpu0.turnstile"))  # the timer is in line
    assert timer == []  # the runs still hold it
    gave_up_at = time.monotonic() + 0.3
    assert lock.acquire(False, lambda: time.monotonic() > gave_up_at) is None  # behind the waiting timer
    first.release()
    second.release()
    waiter.join(timeout=5)
    assert timer and timer[0] is not None
    assert lock.acquire(False, lambda: time.monotonic() > gave_up_at + 0.3) is None  # the timer holds it
    timer[0].release()
    assert lock.acquire(True, never) is not None


def test_perf_steps_start_once_every_first_step_ended_and_hold_their_gpus_lock(tmp_path, monkeypatch):
    """day05 on two fake GPUs: each grading's first step leaves out the perf cases; every perf
    step (the perf cases with the cases they need) comes after the last first step, with the
    lock of its GPU; the merged report has both steps' tests."""
    unit = units.load("day05_layernorm_performance")
    others, timed = batch.perf_split(unit)
    perf = {c.name for c in unit.tests().CASES if c.kind == "perf"}
    assert perf <= set(timed) and not perf & set(others) and set(timed) - perf  # needs come along
    calls, commands = [], []

    def fake_run(command, env, log, timeout, pass_fds=()):
        tests = [command[i + 1] for i, arg in enumerate(command) if arg == "--tests"]
        lock = command[command.index("--gpu-lock") + 1] if "--gpu-lock" in command else None
        calls.append((tests, env["CUDA_VISIBLE_DEVICES"], lock))
        commands.append((command, lock))
        assert env["MAX_JOBS"] == env["OMP_NUM_THREADS"] == "2"  # its share of the 4 cores
        assert json.loads(env[GPU_PROBE_ENV])[0] == env["CUDA_VISIBLE_DEVICES"]  # asked once, by the batch
        out = command[command.index("--out") + 1]
        os.makedirs(out, exist_ok=True)
        names = [t for t in tests if t in perf] if lock else tests
        report = {
            "score": float(len(names)),
            "tests": [{"name": n, "score": 1.0, "max_score": 1.0, "status": "passed", "output": ""} for n in names],
            "extra_data": {
                "unit": unit.name,
                "perf": {n: {"ratio": 1.0} for n in names if n in perf},
                "timings": {"build_s": 0.0 if lock else 20.0, "runs_s": 5.0 if lock else 10.0},
            },
        }
        with open(os.path.join(out, "results.json"), "w") as handle:
            json.dump(report, handle)

    monkeypatch.setattr(batch, "_run_grading", fake_run)
    monkeypatch.setattr(batch, "prepare_reference", lambda unit, gpus: "")
    monkeypatch.setattr(batch, "perf_runs_here", lambda cases, has_gpu: has_gpu)
    monkeypatch.setattr(batch, "available_memory_gb", lambda: 64.0)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    submissions = [collect.Submission(name, str(tmp_path), ()) for name in ("alice", "bob", "carol")]
    options = batch.Options(unit, str(tmp_path / "out"))
    progress = batch.grade_all(submissions, options, ["0", "1"], jobs=2, cpus=4)
    assert progress.graded == 3 and progress.failed == 0
    firsts = [c for c in calls if c[2] is None]
    perf_steps = [c for c in calls if c[2] is not None]
    assert calls == firsts + perf_steps and len(firsts) == len(perf_steps) == 3
    assert all(tests == others for tests, _, _ in firsts) and all(tests == timed for tests, _, _ in perf_steps)
    assert all(os.path.basename(lock) == f"gpu{gpu}" for _, gpu, lock in perf_steps)
    assert all(("--no-own-tests" in command) == (lock is not None) for command, lock in commands)
    # The first step keeps its build where the perf step runs it from, in the batch's private folder.
    kept = sorted(command[command.index("--keep-build") + 1] for command, lock in commands if lock is None)
    assert kept == sorted(command[command.index("--prebuilt") + 1] for command, lock in commands if lock is not None)
    assert len(set(kept)) == 3
    assert all(os.path.dirname(os.path.dirname(path)) == os.path.dirname(perf_steps[0][2]) for path in kept)
    assert not os.path.exists(os.path.dirname(perf_steps[0][2]))  # removed once the batch is done
    merged = json.loads((tmp_path / "out" / "results" / "bob" / "results.json").read_text())
    assert [t["name"] for t in merged["tests"]] == others + [n for n in timed if n in perf]
    assert merged["score"] == len(others) + len(perf) and set(merged["extra_data"]["perf"]) == perf
    assert merged["extra_data"]["timings"] == {"build_s": 20.0, "runs_s": 15.0}  # both steps' time


def test_a_grading_takes_the_batchs_answer_for_its_gpu_and_asks_only_for_others(monkeypatch):
    """grade-all probes each GPU once and hands the answer to the gradings on it: a grading
    starts no process of its own to ask, unless it runs on other GPUs than the answer's."""
    from autograder import machine

    probes = []
    real_run = subprocess.run

    def counted(command, **options):
        probes.append(options["env"].get("CUDA_VISIBLE_DEVICES"))
        return real_run(command, **options)

    monkeypatch.setattr(machine.subprocess, "run", counted)
    monkeypatch.setenv(GPU_PROBE_ENV, json.dumps(["3", "9.0", 1]))
    machine.gpus_of.cache_clear()
    try:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
        assert machine.gpu_capability() == "9.0" and machine.gpu_count() == 1 and probes == []
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU visible: this one it asks
        assert machine.gpu_capability() is None and probes == [""]
    finally:
        machine.gpus_of.cache_clear()


def test_the_reference_is_built_before_the_gradings_where_its_perf_cases_run(monkeypatch):
    """Built once up front, so no grading's perf step builds it while holding its GPU's lock;
    not at all where no perf case can run (GPU cases, no GPU)."""
    built = []
    monkeypatch.setattr(batch, "reference", lambda unit, env: built.append((unit.name, env["TORCH_CUDA_ARCH_LIST"])))
    monkeypatch.setattr(batch, "gpu_capability", lambda: "9.0")
    unit = units.load("day05_layernorm_performance")
    assert batch.prepare_reference(unit, []) == "" and built == []
    assert batch.prepare_reference(UNIT, ["0"]) == "" and built == []  # day01 has no perf cases
    assert batch.prepare_reference(unit, ["0", "1"]) == ""
    assert built == [(unit.name, os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0"))]

    def fails(unit, env):
        raise OSError("disk full")

    monkeypatch.setattr(batch, "reference", fails)
    assert "disk full" in batch.prepare_reference(unit, ["0"])


def _fake_gradings(monkeypatch) -> list[str]:
    """Gradings that pass without running anything; the list of the ids graded, in order."""
    graded = []

    def fake_run(command, env, log, timeout, pass_fds=()):
        out = command[command.index("--out") + 1]
        graded.append(os.path.basename(out))
        with open(os.path.join(out, "results.json"), "w") as handle:
            json.dump({"score": 1.0, "tests": [], "extra_data": {"unit": UNIT.name}}, handle)

    monkeypatch.setattr(batch, "_run_grading", fake_run)
    return graded


def test_a_grader_failure_on_one_submission_leaves_the_rest_graded(tmp_path, monkeypatch, capsys):
    """alice's hand-in is gone by the time its grading starts, and bob's last state cannot be
    read: alice's grading fails, bob is graded again, and the batch goes on."""
    graded = _fake_gradings(monkeypatch)
    options = batch.Options(UNIT, str(tmp_path / "out"))
    state = tmp_path / "out" / "results" / "bob"
    state.mkdir(parents=True)
    (state / gradebook.STATE).write_text("{not json")
    submissions = [
        collect.Submission("alice", str(tmp_path / "gone.zip"), ()),
        collect.Submission("bob", str(tmp_path / "bob.ipynb"), ()),
    ]
    (tmp_path / "bob.ipynb").write_text("{}")
    progress = batch.grade_all(submissions, options, [], jobs=1, cpus=2)
    assert (progress.graded, progress.failed) == (1, 1) and graded == ["bob"]
    assert "alice: the grader failed: FileNotFoundError" in capsys.readouterr().err
    # alice's record says so: the gradebook lists her as failed, and no earlier grade of hers stands
    state = json.loads((tmp_path / "out" / "results" / "alice" / gradebook.STATE).read_text())
    assert state["status"] == "failed" and "FileNotFoundError" in state["error"]


def test_a_graded_submission_whose_results_are_damaged_is_graded_again(tmp_path, monkeypatch):
    """Same hand-in, same grader version, but its results.json is cut short: resuming grades it
    again instead of keeping a record the reports cannot read."""
    graded = _fake_gradings(monkeypatch)
    (tmp_path / "carol.ipynb").write_text("{}")
    submissions = [collect.Submission("carol", str(tmp_path / "carol.ipynb"), ())]
    options = batch.Options(UNIT, str(tmp_path / "out"))
    assert batch.grade_all(submissions, options, [], jobs=1, cpus=2).graded == 1
    assert batch.grade_all(submissions, options, [], jobs=1, cpus=2).graded == 0  # unchanged: skipped
    (tmp_path / "out" / "results" / "carol" / "results.json").write_text('{"score": 1.0, "te')
    assert batch.grade_all(submissions, options, [], jobs=1, cpus=2).graded == 1
    assert graded == ["carol", "carol"]


def test_a_named_pipe_among_the_hand_ins_fails_its_grading_without_waiting(tmp_path, monkeypatch):
    """A hand-in that is a named pipe, or a folder holding one, is not opened and waited on: the
    pipe alone fails, the folder is graded, and the batch ends."""
    _fake_gradings(monkeypatch)
    os.mkfifo(tmp_path / "pipe.zip")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "folder" / "relu_bias.cu")
    submissions = [
        collect.Submission("pipe", str(tmp_path / "pipe.zip"), ()),
        collect.Submission("folder", str(tmp_path / "folder"), ()),
    ]
    done = []
    worker = threading.Thread(
        target=lambda: done.append(
            batch.grade_all(submissions, batch.Options(UNIT, str(tmp_path / "out")), [], jobs=1, cpus=2)
        ),
        daemon=True,
    )
    worker.start()
    worker.join(60)
    assert done, "the batch waited on a named pipe"
    assert (done[0].graded, done[0].failed) == (1, 1)
    state = json.loads((tmp_path / "out" / "results" / "pipe" / gradebook.STATE).read_text())
    assert state["status"] == "failed" and "not a regular file" in state["error"]


def test_gradings_find_the_precompiled_header_where_one_is_asked_for(tmp_path, monkeypatch):
    """With COURSE_PRECOMPILED_HEADERS, the header is started once for the batch, its folder
    comes first on every grading's CPATH, and its maker is ended with the batch."""
    paths, started, stopped = [], [], []

    def fake_run(command, env, log, timeout, pass_fds=()):
        paths.append(env.get("CPATH"))
        out = command[command.index("--out") + 1]
        with open(os.path.join(out, "results.json"), "w") as handle:
            json.dump({"score": 1.0, "tests": [], "extra_data": {"unit": UNIT.name}}, handle)

    maker = object()
    monkeypatch.setattr(batch, "_run_grading", fake_run)
    monkeypatch.setattr(batch.precompiled_header, "start", lambda base: started.append(base) or ("/made/here", maker))
    monkeypatch.setattr(batch.precompiled_header, "stop", stopped.append)
    monkeypatch.setenv("CPATH", "/theirs")
    submissions = [collect.Submission(name, str(tmp_path / f"{name}.ipynb"), ()) for name in ("alice", "bob")]
    for name in ("alice", "bob"):
        (tmp_path / f"{name}.ipynb").write_text("{}")
    monkeypatch.setenv("COURSE_PRECOMPILED_HEADERS", str(tmp_path / "headers"))
    batch.grade_all(submissions, batch.Options(UNIT, str(tmp_path / "out")), [], jobs=1, cpus=2)
    assert started == [str(tmp_path / "headers")] and stopped == [maker]
    assert paths == ["/made/here" + os.pathsep + "/theirs"] * 2
    paths.clear()
    monkeypatch.delenv("COURSE_PRECOMPILED_HEADERS")
    batch.grade_all(submissions, batch.Options(UNIT, str(tmp_path / "out2")), [], jobs=1, cpus=2)
    assert paths == ["/theirs"] * 2 and len(started) == 1


class _CpuAsGpu(GroupRunner):
    """A runner that gates its CPU children as it would a GPU's: the protocol, without a GPU."""

    def _gated(self, device: str) -> bool:
        return self.gpu_lock is not None


def test_a_child_loads_its_module_only_once_the_runner_holds_the_gpus_lock(tmp_path):
    lock = GpuLock(str(tmp_path / "locks" / "gpu0"))
    timing = lock.acquire(True, lambda: False)  # another grading times on the GPU
    env = child_env(None)
    sandbox = Sandbox.open("none", str(tmp_path), env=env)
    load = {
        "solutions": UNIT.solutions,
        "unit": UNIT.name,
        "plan": UNIT.plan().to_json(),
        "built": None,
        "source_dir": str(tmp_path),
    }
    runner = _CpuAsGpu(load, sandbox, str(tmp_path), env, Deadline(300), prefix="run_", gpu_lock=lock)
    index, case = next((i, c) for i, c in enumerate(UNIT.tests().CASES) if c.device == "cpu" and c.kind == "values")
    outcomes = {}
    thread = threading.Thread(
        target=lambda: outcomes.update(
            runner.run("cpu", "cpu", [(index, case)], {index: make_input_sets(UNIT.tests(), case, 1)})
        )
    )
    try:
        thread.start()
        deadline = time.monotonic() + 120
        while not glob.glob(str(tmp_path / "run_cpu.*" / "warm")) and time.monotonic() < deadline:
            time.sleep(0.05)
        (folder,) = glob.glob(str(tmp_path / "run_cpu.*"))
        time.sleep(1.0)
        assert os.listdir(folder) and not any(name in os.listdir(folder) for name in ("go", "ready"))
        assert thread.is_alive()  # the child waits, warm, with no module loaded
        timing.release()
        thread.join(timeout=120)
        assert set(outcomes) == {index} and isinstance(outcomes[index], dict)
        # It waited from when it saw the child warm (within a poll of the test seeing it, 0.05 s)
        # until the release, 1 s after the test saw it.
        assert runner.lock_wait_seconds >= 0.9 and os.path.exists(os.path.join(folder, "ready"))
    finally:
        timing.release()
        thread.join(timeout=120)
        sandbox.close()


def test_a_record_whose_writing_fails_leaves_the_last_one_whole(tmp_path):
    """grading.json is replaced only by a whole new one: a write that fails halfway (here, data
    JSON cannot hold) keeps the last record and leaves no partial file behind."""
    path = tmp_path / gradebook.STATE
    batch._write_json({"status": "graded"}, str(path))
    with pytest.raises(TypeError):
        batch._write_json({"status": "failed", "error": object()}, str(path))
    assert json.loads(path.read_text()) == {"status": "graded"}
    assert [p.name for p in tmp_path.iterdir()] == [gradebook.STATE]


def test_a_class_graded_again_starts_with_its_longest_gradings(tmp_path, monkeypatch):
    """Graded again (--regrade, or a new grader version), the queue runs longest first by the last
    grading's time, those never graded ahead of all: no long grading starts last."""
    graded = _fake_gradings(monkeypatch)
    names = ["ann", "ben", "cal", "dee"]
    for name in names:
        (tmp_path / f"{name}.ipynb").write_text("{}")
    submissions = [collect.Submission(name, str(tmp_path / f"{name}.ipynb"), ()) for name in names]
    options = batch.Options(UNIT, str(tmp_path / "out"), regrade=True)
    batch.grade_all(submissions[:3], options, [], jobs=1, cpus=2)
    for name, seconds in [("ann", 12.0), ("ben", 140.5), ("cal", 31.0)]:
        path = tmp_path / "out" / "results" / name / gradebook.STATE
        path.write_text(json.dumps({**json.loads(path.read_text()), "seconds": seconds}))
    batch.grade_all(submissions, options, [], jobs=1, cpus=2)
    assert graded == ["ann", "ben", "cal"] + ["dee", "ben", "cal", "ann"]


def _fake_cpu_gradings(monkeypatch) -> list[str]:
    """Gradings that pass without running anything, seeing no GPU (--cpu-only): each reports a
    CPU case passed and a GPU case not run. The ids graded, in order."""
    graded = []

    def fake_run(command, env, log, timeout, pass_fds=()):
        assert env["CUDA_VISIBLE_DEVICES"] == "" and pass_fds  # no GPU; its claim held while it runs
        out = command[command.index("--out") + 1]
        graded.append(os.path.basename(out))
        tests = [
            {
                "name": "cpu_values",
                "score": 1.0,
                "max_score": 1.0,
                "status": "passed",
                "output": "",
                "tags": ["values", "cpu"],
            },
            {
                "name": "cuda_values",
                "score": 0.0,
                "max_score": 1.0,
                "status": "failed",
                "output": "not run: no GPU on the grading machine",
                "tags": ["values", "cuda"],
            },
        ]
        with open(os.path.join(out, "results.json"), "w") as handle:
            json.dump({"score": 1.0, "tests": tests, "extra_data": {"unit": UNIT.name}}, handle)

    monkeypatch.setattr(batch, "_run_grading", fake_run)
    return graded


def test_a_messy_class_folder_is_graded_end_to_end(tmp_path, monkeypatch, capsys):
    """A name that is not UTF-8, one student's zip and notebook, a roster naming one who handed
    in nothing: grade-all --cpu-only grades each once, and the reports say all of it."""
    graded = _fake_cpu_gradings(monkeypatch)
    hand_ins = tmp_path / "class"
    hand_ins.mkdir()
    with open(os.path.join(os.fsencode(hand_ins), b"j\xf6rg.ipynb"), "w") as handle:  # Latin-1, as Windows zips
        handle.write("{}")
    for name, mtime in (("alice.ipynb", 2000), ("alice.zip", 1000)):
        (hand_ins / name).write_text("{}")
        os.utime(hand_ins / name, (mtime, mtime))
    (tmp_path / "roster.csv").write_text("id,email\nalice,alice@example.edu\nzoe,zoe@example.edu\n")
    out = tmp_path / "out"
    args = [
        "grade-all",
        str(hand_ins),
        "--unit",
        UNIT.name,
        "--out",
        str(out),
        "--gpus",
        "none",
        "--cpu-only",
        "--roster",
        str(tmp_path / "roster.csv"),
    ]
    assert main(args) == 0
    assert sorted(graded) == ["alice", "j_rg"]
    rows = [(r["Name"], r["Email"], r["Total Score"], r["Status"], r["Submission"]) for r in _gradebook(out)]
    assert rows == [
        ("alice", "alice@example.edu", "1", gradebook.NO_GPU, "alice"),
        ("j\ufffdrg", "", "1", gradebook.NO_GPU, "j_rg"),
        ("zoe", "zoe@example.edu", "", gradebook.MISSING, ""),
    ]
    failures = (out / "failures.md").read_text()
    assert "- `alice`: 2 hand-ins of alice: graded alice.ipynb" in failures and "zoe@example.edu" in failures
    err = capsys.readouterr().err
    assert "grading: alice" in err or "grading: j_rg" in err  # the progress line names who is in flight

    # --only: that one graded again, the others kept, and the reports rewritten with everyone.
    (out / "gradebook.csv").unlink()
    assert main(args + ["--only", "j_rg"]) == 0
    assert sorted(graded) == ["alice", "j_rg", "j_rg"] and len(_gradebook(out)) == 3
    with pytest.raises(SystemExit):
        main(args + ["--only", "nobody"])
    assert "--only nobody: no submission has this id; expected one of alice, j_rg" in capsys.readouterr().err

    # alice's zip is removed: her notebook, unchanged, is not graded again, and the note is gone.
    (hand_ins / "alice.zip").unlink()
    assert main(args) == 0
    assert sorted(graded) == ["alice", "j_rg", "j_rg"]
    assert "2 hand-ins" not in (out / "failures.md").read_text()

    # Her notebook is removed too, and the roster left out: she drops out of the gradebook.
    (hand_ins / "alice.ipynb").unlink()
    assert main(args[:-2]) == 0
    assert [r["Submission"] for r in _gradebook(out)] == ["j_rg"]


def test_grade_all_without_a_gpu_refuses_a_unit_with_gpu_cases(tmp_path, capsys):
    (tmp_path / "alice.ipynb").write_text("{}")
    with pytest.raises(SystemExit) as exit_:
        main(["grade-all", str(tmp_path), "--unit", UNIT.name, "--out", str(tmp_path / "out"), "--gpus", "none"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"{UNIT.name} has {len(batch.gpu_cases(UNIT))} GPU cases and no GPU is visible here" in err
    assert "--cpu-only" in err and not (tmp_path / "out").exists()


def test_the_progress_line_names_the_gradings_in_flight():
    progress = batch.Progress(3, stream=io.StringIO())
    for who in ("ann", "ben"):
        progress.started(who)
    assert progress.line().endswith("| grading: ann, ben") and progress.line().startswith("[0/3]")
    progress.count("graded", "ann")
    assert progress.line().endswith("| grading: ben") and "graded 1" in progress.line()
    assert "ETA" in progress.line()


_TOLD_TO_STOP = (
    "import os, signal, sys, time\n"
    "out, name = sys.argv[1], sys.argv[2]\n"
    "signal.signal(signal.SIGTERM, lambda *_: (open(os.path.join(out, name), 'w').close(), sys.exit(143)))\n"
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_reaches_every_grading_process_and_leaves_them_to_grade_again(tmp_path, monkeypatch, signum):
    """Told to stop, the batch passes SIGTERM to the grading in flight and the processes it
    started (a session of their own, out of a terminal's reach), starts no other grading,
    records the one it stopped as failed, and puts its handlers back."""
    code = (
        f"import subprocess\n{_TOLD_TO_STOP}"
        f"subprocess.Popen([sys.executable, '-c', {_TOLD_TO_STOP + 'time.sleep(100)'!r}, out, 'child_told'])\n"
        "time.sleep(1)\n"
        "open(os.path.join(out, 'started'), 'w').close()\n"
        "time.sleep(100)\n"
    )
    monkeypatch.setattr(
        batch, "_grade_command", lambda submission, options, out, seed, tests: [sys.executable, "-c", code, out, "told"]
    )
    names = ["ann", "ben"]
    for name in names:
        (tmp_path / f"{name}.ipynb").write_text("{}")
    submissions = [collect.Submission(name, str(tmp_path / f"{name}.ipynb"), ()) for name in names]
    out = tmp_path / "out"

    def stop_once_started():
        for _ in range(600):
            if glob.glob(str(out / "results" / "*" / "started")):
                os.kill(os.getpid(), signum)
                return
            time.sleep(0.05)

    before = signal.getsignal(signum)
    threading.Thread(target=stop_once_started, daemon=True).start()
    start = time.monotonic()
    progress = batch.grade_all(submissions, batch.Options(UNIT, str(out), cpu_only=True), [], jobs=1, cpus=2)
    assert progress.stopped == signum and time.monotonic() - start < 60
    assert signal.getsignal(signum) is before
    (stopped,) = glob.glob(str(out / "results" / "*" / "told"))  # one started, and it was told
    for _ in range(200):  # the process it started was told too, at the same time
        if os.path.exists(Path(stopped).parent / "child_told"):
            break
        time.sleep(0.05)
    assert os.path.exists(Path(stopped).parent / "child_told")
    state = json.loads((Path(stopped).parent / gradebook.STATE).read_text())
    assert state["status"] == "failed" and state["error"].startswith(f"stopped by {signum.name}")
    assert len(os.listdir(out / "results")) == 1  # the other never started


def test_a_submission_another_live_grading_holds_is_left_alone(tmp_path, monkeypatch):
    """Its claim is held by a grading process (an inherited lock) even after the batch that
    started it let go: a second batch grades the others, and leaves its folder as it is."""
    graded = _fake_cpu_gradings(monkeypatch)
    out = tmp_path / "out"
    claim = batch.Claim(str(out), "ann")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(100)"], pass_fds=(claim.fd,))
    try:
        claim.release()  # the batch is gone; its grading process still holds the lock
        (out / "results" / "ann").mkdir(parents=True)
        (out / "results" / "ann" / "grade.log").write_text("still grading")
        for name in ("ann", "ben"):
            (tmp_path / f"{name}.ipynb").write_text("{}")
        submissions = [collect.Submission(n, str(tmp_path / f"{n}.ipynb"), ()) for n in ("ann", "ben")]
        progress = batch.grade_all(submissions, batch.Options(UNIT, str(out), cpu_only=True), [], jobs=1, cpus=2)
        assert (progress.graded, progress.busy) == (1, 1) and graded == ["ben"]
        assert os.listdir(out / "results" / "ann") == ["grade.log"]
    finally:
        holder.kill()
        holder.wait()
    assert batch.grade_all(submissions, batch.Options(UNIT, str(out), cpu_only=True), [], jobs=1, cpus=2).graded == 1
    assert graded == ["ben", "ann"]
