"""The uid sandbox (autograder/sandbox.py's fallback where bubblewrap cannot run, the GPU
machines among them), forced here as root: what a build may read of the course, what a
grading's uid leaves behind, which uid the next grading gets, and the compiler cache.

Sandbox.open's check imports the course with this Python, which a sandbox uid cannot reach
on every machine (under root's home, say), so these runs use the system's Python or a shell."""

import json
import os
import shutil
import subprocess

import pytest

from autograder.sandbox import CCACHE_GID, Limits, Sandbox
from autograder.suite_access import hidden_from_runs, suite_files, suite_request
from autograder.uid_pool import take_uid
from course.spec import units

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNIT = "day01_relu_bias"
SYSTEM_PYTHON = "/usr/bin/python3"
LIMITS = Limits(cpu_seconds=60)


@pytest.fixture
def uid_mode(monkeypatch):
    """Sandbox.open("uid") without its check, which runs the course with this Python."""
    if os.geteuid() != 0:
        pytest.skip("a uid of its own needs a root grader")
    monkeypatch.setattr(Sandbox, "_try", lambda self, work, env: "")


def _course_copy(root) -> units.Unit:
    """The unit's folder, the shared one, another unit's and a .git, in a course of the test's
    own: closing them to other users must not touch the checkout's."""
    course = root / "course"
    for name in (UNIT, "common", "day05_layernorm_performance"):
        shutil.copytree(os.path.join(REPO, "solutions", name), course / "solutions" / name)
    (course / ".git" / "objects").mkdir(parents=True)
    (course / ".git" / "objects" / "pack").write_text("every file of solutions/, compressed")
    return units.load(UNIT, repo=str(course))


def _run(box, work, argv, files=None, env=None, ccache=False):
    folder = box.folder(str(work), "build_")
    for name, text in (files or {}).items():
        with open(os.path.join(folder, name), "w") as handle:
            handle.write(text)
    box.give(folder)
    return box.run(
        argv, timeout=60, writable=[folder], cwd=folder, env=env or dict(os.environ), limits=LIMITS, ccache=ccache
    )


READS = """
import json, os, sys
def read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None
def listed(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return None
secret, suite, folders = json.loads(sys.argv[1])
print(json.dumps({"secret": {p: read(p) for p in secret}, "suite": [read(p) for p in suite],
                  "listed": {p: listed(p) for p in folders}}))
"""


def test_a_build_reads_only_the_suite_of_the_solutions(tmp_path, uid_mode):
    """A package's setup.py, run by the build, tries to read the hidden suite, the unit's answer
    key and reference, another unit's hidden suite and the repository's objects: none can be
    read, nor listed. What a test process imports (the public suite and the shared Python
    pieces) is read from the grading's copy, the one its request names."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON} for the build step")
    unit = _course_copy(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    box = Sandbox.open("uid", str(work), read_only=suite_files(unit), hidden=hidden_from_runs(unit))
    try:
        assert box.mode == "uid" and box.uid is not None
        git = os.path.join(os.path.dirname(unit.solutions), ".git")
        secret = [os.path.join(unit.folder, n) for n in ("hidden_tests.py", "answers.md", "relu_bias.cu")]
        secret += [os.path.join(unit.solutions, "day05_layernorm_performance", "hidden_tests.py")]
        secret += [os.path.join(git, "objects", "pack")]
        seen = [box.seen_as(path) for path in suite_files(unit)]
        copied = box.seen_as(unit.solutions)
        folders = [unit.solutions, unit.folder, git, os.path.join(copied, UNIT)]
        arguments = json.dumps([secret, seen, folders])
        code, output = _run(box, work, [SYSTEM_PYTHON, "setup.py", arguments], {"setup.py": READS}, ccache=True)
        assert code == 0, output
        found = json.loads(output.strip().splitlines()[-1])
        assert all(os.path.exists(p) for p in secret)  # there, for the grader
        assert found["secret"] == {p: None for p in secret}, found["secret"]
        assert found["suite"] == [open(p).read() for p in suite_files(unit)]
        assert found["listed"] == {unit.solutions: None, unit.folder: None, git: None, folders[-1]: ["public_tests.py"]}
        assert suite_request(unit, box)["solutions"] == copied != unit.solutions
    finally:
        box.close()


def test_files_a_uid_leaves_outside_its_folder_are_removed(tmp_path, uid_mode):
    """A hostile child leaves files in /tmp and /dev/shm (a folder with a file in it too); once
    the grading's sandbox closes they are gone. What it wrote in its own folder is the
    grading's to remove (with the folder)."""
    places = [f"/tmp/left_by_{tmp_path.name}", f"/dev/shm/left_by_{tmp_path.name}"]
    places = [p for p in places if os.path.isdir(os.path.dirname(p))]
    script = "; ".join([*(f"echo x > {p}" for p in places), f"mkdir {places[0]}.d", f"echo x > {places[0]}.d/f"])
    script += "; echo x > mine"
    work = tmp_path / "work"
    work.mkdir()
    box = Sandbox.open("uid", str(work))
    try:
        code, output = _run(box, work, ["sh", "-c", script])
        assert code == 0, output
        left = [*places, places[0] + ".d"]
        assert all(os.stat(p).st_uid == box.uid for p in left)
    finally:
        box.close()
    assert [p for p in left if os.path.lexists(p)] == []
    assert [str(p) for p in work.rglob("mine")]  # its own folder is the grading's


def test_consecutive_gradings_get_different_uids_and_parallel_ones_never_share(tmp_path, uid_mode):
    uids = []
    for index in range(3):
        work = tmp_path / f"work{index}"
        work.mkdir()
        box = Sandbox.open("uid", str(work))
        uids.append(box.uid)
        box.close()
    assert len(set(uids)) == 3, uids
    first, second = take_uid(), take_uid()
    try:
        assert first[0] is not None and second[0] is not None and first[0] != second[0]
    finally:
        first[1].close()
        second[1].close()


def test_a_uid_build_gets_no_shared_compiler_cache(tmp_path, uid_mode):
    """A uid build could write entries (or ccache.conf, whose compiler_check runs a command)
    that another grading's build would use: the cache is off, and the uid is not in its group."""
    cache = tmp_path / "ccache"
    cache.mkdir(mode=0o2775)
    os.chown(cache, -1, CCACHE_GID)  # as an earlier bwrap grading left it
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, CCACHE_DIR=str(cache))
    env.pop("CCACHE_DISABLE", None)
    box = Sandbox.open("uid", str(work), env=env)
    try:
        assert box.describe()["shared_ccache"] is False
        script = f'echo "$CCACHE_DISABLE|$CCACHE_DIR|$(id -G)"; touch {cache}/planted; echo x > {cache}/ccache.conf'
        code, output = _run(box, work, ["sh", "-c", script], env=env, ccache=True)
    finally:
        box.close()
    assert output.splitlines()[0] == f"1||{box.uid}", output
    assert os.listdir(cache) == []


def test_a_worktree_hides_its_main_repository_objects(tmp_path):
    """In a git worktree `.git` is a file naming a folder in the main repository, which holds
    the objects of every worktree."""
    main = tmp_path / "main"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    subprocess.run(
        ["git", "-C", str(main), "commit", "-q", "--allow-empty", "-m", "first"],
        check=True,
        env=dict(
            os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@b", GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@b"
        ),
    )
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(tmp_path / "wt")], check=True)
    shutil.copytree(os.path.join(REPO, "solutions", UNIT), tmp_path / "wt" / "solutions" / UNIT)
    assert hidden_from_runs(units.load(UNIT, repo=str(tmp_path / "wt")))[1] == str(main / ".git")


def test_graders_with_other_homes_share_one_uid_pool(tmp_path, monkeypatch):
    """A grader run with another HOME (a fresh venv's, Gradescope's) that took its uid locks in
    a folder of its own would take, and reap, the uid another grader's children run as."""
    from autograder import uid_pool

    first = uid_pool.locks_folder()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    assert uid_pool.locks_folder() == first
