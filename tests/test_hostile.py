"""Submissions that attack the grader (autograder/hostile/hostile.toml), graded on the CPU:
each gets its verdict, the report is the grader's, and nothing of the grading is left: no
process, no temporary folder, no file planted outside the sandbox, no secret in the report."""

import contextlib
import fnmatch
import glob
import json
import os
import secrets
import signal
import site
import subprocess
import sys
import time
import tomllib

import pytest
from helpers import built_unit

from autograder import report
from autograder.grade import grade
from autograder.grade_options import GradeOptions
from autograder.sandbox import Sandbox
from course.spec import mutants, units

pytestmark = pytest.mark.autograder
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTILE_TOML = os.path.join(REPO, "autograder", "hostile", "hostile.toml")
with open(HOSTILE_TOML, "rb") as _handle:
    UNIT = units.load(tomllib.load(_handle)["unit"])
HOSTILE = mutants.load_file(HOSTILE_TOML)
SEED = 7


@pytest.fixture(autouse=True, scope="module")
def _compiler_cache_warm(build_root):
    """Build the unit's reference once, outside any grading: a submission built from the same
    C++ then compiles from the compiler cache, and a grading with a short time limit is not
    cut short by a cold build."""
    built_unit(UNIT.name, "solution", build_root)


def _params(after_exit: bool):
    return [pytest.param(m, id=m.name) for m in HOSTILE.values() if m.after_exit == after_exit]


def _submission(mutant, tmp_path) -> str:
    if mutant.submission:
        return mutant.submission
    mutants.write(UNIT, mutant, str(tmp_path / "submission"))
    return str(tmp_path / "submission")


def _secret_for_the_taking(tmp_path) -> str:
    """A secret in the grader's environment and in a file of another grading beside this one."""
    secret = "s3cr3t-" + secrets.token_hex(8)
    other = tmp_path / "work" / "grade_day01_relu_bias_other"
    other.mkdir(parents=True, mode=0o700)
    (other / "secret.txt").write_text(secret)
    return secret


def _sandbox_mode(tmp_path) -> str:
    (tmp_path / "probe").mkdir()
    box = Sandbox.open("auto", str(tmp_path / "probe"))
    try:
        return box.mode
    finally:
        box.close()


def _started_at(pid: str) -> float:
    """When process `pid` started, in seconds since the epoch."""
    with open("/proc/stat") as handle:
        boot = next(int(line.split()[1]) for line in handle if line.startswith("btime"))
    with open(f"/proc/{pid}/stat") as handle:
        ticks = int(handle.read().rsplit(")", 1)[1].split()[19])  # field 22, after the command's name
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _alive(tmp_path, uid, ended: float) -> list[str]:
    """Processes of the grading: run in or on its folders, or as its sandbox uid and started
    before it ended (the uid is free once the grading ends, and a grading running beside
    this test may take it)."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as handle:
                status = dict(line.split(":", 1) for line in handle if ":" in line)
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
            started = _started_at(pid)
        except (OSError, ValueError, IndexError, StopIteration):
            continue
        if status["State"].strip().startswith("Z"):
            continue
        ours = int(status["Uid"].split()[0]) == uid and started < ended
        if str(tmp_path) in cmdline or cwd.startswith(str(tmp_path)) or ours:
            alive.append(f"{pid} {cmdline[:120]}")
    return alive


def _planted() -> list[str]:
    places = [
        *site.getsitepackages(),
        site.getusersitepackages(),
        os.path.join(REPO, "course"),
        os.path.expanduser("~root"),
        *filter(None, [os.environ.get("CCACHE_DIR")]),
    ]
    found = [path for place in places for path in glob.glob(os.path.join(place, "*hostile_planted*"))]
    for path in found:  # no later process may run them
        os.remove(path)
    return found


def _check(mutant, data: dict, tmp_path, ended: float, secret: str = "") -> None:
    """The verdict, the report and what is left after the grading (which ended at `ended`)."""
    tests = data["tests"]
    names = [t["name"] for t in tests]
    graded = [
        c.name
        for c in UNIT.tests().CASES
        if not mutant.tests or any(fnmatch.fnmatchcase(c.name, p) for p in mutant.tests)
    ]
    assert names == ["build", *graded]
    not_run = {t["name"] for t in tests if t["output"].startswith("not run")}
    failed = {t["name"] for t in tests if t["status"] == "failed"} - not_run
    table = "\n".join(f"{t['name']}: {t['status']}: {t['output'][:300]}" for t in tests)
    assert failed == mutant.expected_losses(names), table
    assert not_run == {n for n in names if any(fnmatch.fnmatchcase(n, p) for p in mutant.not_run)}, table
    assert all(mutant.says in t["output"] for t in tests if t["name"] in failed), table
    extra = data["extra_data"]
    assert extra["unit"] == UNIT.name and extra["seed"] == SEED and extra["sandbox"]["mode"] in ("bwrap", "uid")
    text = json.dumps(data)
    assert len(text) < 200_000, f"the report is {len(text)} characters long"
    assert "forged" not in text and "root:x:0:0" not in text and (not secret or secret not in text)
    assert _alive(tmp_path, extra["sandbox"]["uid"], ended) == []
    assert [p for p in os.listdir(tmp_path / "work") if not p.endswith("_other")] == []  # its folders removed
    assert _planted() == []


@pytest.mark.parametrize("mutant", _params(after_exit=False))
def test_hostile_submission_gets_its_verdict(mutant, tmp_path, monkeypatch):
    if mutant.sandbox and _sandbox_mode(tmp_path) != mutant.sandbox:
        pytest.skip(f"its verdict needs the {mutant.sandbox} sandbox, which this machine cannot run")
    secret = _secret_for_the_taking(tmp_path)
    monkeypatch.setenv("GRADER_SECRET", secret)
    limit = dict(time_limit=mutant.time_limit) if mutant.time_limit else {}
    options = GradeOptions(
        seed=SEED,
        work=str(tmp_path / "work"),
        has_gpu=False,
        tests=mutant.tests,
        case_timeout=mutant.case_timeout or None,
        **limit,
    )
    result = grade(_submission(mutant, tmp_path), UNIT, options)
    ended = time.time()
    with open(report.write(result, str(tmp_path / "out"))) as handle:
        _check(mutant, json.load(handle), tmp_path, ended, secret)


def _grade_command(mutant, tmp_path, out) -> list[str]:
    """`python -m autograder grade` of the attack's submission, as a batch runs it."""
    submission = _submission(mutant, tmp_path)
    grade = ["grade", submission, "--unit", UNIT.name, "--out", str(out), "--work", str(tmp_path / "work")]
    return [sys.executable, "-m", "autograder", *grade, "--seed", str(SEED)]


@pytest.mark.parametrize("mutant", _params(after_exit=True))
def test_hostile_submission_leaves_the_report_alone_after_the_grader_exits(mutant, tmp_path):
    secret = _secret_for_the_taking(tmp_path)
    out = tmp_path / "out"
    command = _grade_command(mutant, tmp_path, out)
    command += [arg for pattern in mutant.tests for arg in ("--tests", pattern)]
    command += ["--time-limit", str(mutant.time_limit)] if mutant.time_limit else []
    done = subprocess.run(
        command, cwd=REPO, env={**os.environ, "GRADER_SECRET": secret}, capture_output=True, text=True, timeout=600
    )
    ended = time.time()
    assert done.returncode == 0, done.stderr[-3000:]
    written = (out / "results.json").read_bytes()
    time.sleep(10)  # long enough for anything left behind to strike
    assert (out / "results.json").read_bytes() == written
    assert os.listdir(out) == ["results.json"]
    _check(mutant, json.loads(written), tmp_path, ended, secret)


def test_a_grader_told_to_stop_leaves_no_process_of_its_sandbox(tmp_path):
    """SIGTERM (kill, a batch's or Slurm's time limit) ends a grading and every process of its
    sandbox. In a uid sandbox they run in sessions of their own: nothing else reaches them."""
    if os.geteuid() != 0:
        pytest.skip("a sandbox uid needs root")
    mutant = HOSTILE["hangs_every_call"]  # its case waits for ever: only the grader can end it
    command = _grade_command(mutant, tmp_path, tmp_path / "out")
    grader = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        end = time.time() + 240
        while not any("autograder.child" in process for process in _alive(tmp_path, None, 0)):
            assert time.time() < end and grader.poll() is None, "no case of the grading started"
            time.sleep(0.2)
        grader.send_signal(signal.SIGTERM)
        assert grader.wait(timeout=60) == 128 + signal.SIGTERM, grader.stderr.read()[-3000:]
        assert _alive(tmp_path, None, 0) == []
        assert not (tmp_path / "out" / "results.json").exists() and os.listdir(tmp_path / "work") == []
    finally:
        for pid in [grader.pid, *(int(process.split()[0]) for process in _alive(tmp_path, None, 0))]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        grader.wait()
