"""README's first command on a fresh machine: no bubblewrap, the project in a virtual
environment under a private home folder, graded as root (a sandbox's uid cannot reach that
Python). `reference` grades the course's own code without a sandbox and says so; `grade` and
`grade-all` on student code refuse, naming the cures that apply here."""

import os
import shutil
import subprocess
import tempfile
import zipfile

import clean_venv
import pytest

from autograder import sandbox
from course.spec import units

pytestmark = pytest.mark.autograder
UNIT = units.load("day01_relu_bias")
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _path_without_bwrap(folder) -> str:
    """A PATH of one folder linking every command on this PATH but bwrap."""
    folder.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        for name in sorted(os.listdir(entry)) if os.path.isdir(entry) else ():
            if name != "bwrap" and not (folder / name).exists():
                (folder / name).symlink_to(os.path.join(entry, name))
    return str(folder)


@pytest.fixture
def fresh(tmp_path):
    """(the private venv's python, the environment of a machine without bubblewrap, its home).
    The home is the one folder on the way that others may not pass (pytest's own are private)."""
    if os.geteuid() != 0:
        pytest.skip("plays a root grader")
    outside = tempfile.mkdtemp(prefix="fresh_machine_")
    os.chmod(outside, 0o755)
    home = os.path.join(outside, "home")
    os.mkdir(home, 0o700)
    try:
        venv = os.path.join(home, "venv")
        python = clean_venv.create(venv, system_site_packages=True)  # torch from this machine
        env = clean_venv.env(venv, HOME=home, PATH=_path_without_bwrap(tmp_path / "bin"))
        env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env["PATH"]
        assert subprocess.run(["which", "bwrap"], env=env, capture_output=True).returncode != 0
        yield python, env, home
    finally:
        shutil.rmtree(outside)


def _autograder(python, env, *args, cwd=CHECKOUT):
    # run from the checkout: its packages, not an installed copy (tests/test_installed.py has that)
    return subprocess.run(
        [python, "-m", "autograder", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200
    )


def test_grading_student_code_refuses_and_names_the_cures(fresh, tmp_path):
    python, env, private = fresh
    UNIT.write("solution", str(tmp_path / "upload"))
    graded = _autograder(
        python, env, "grade", str(tmp_path / "upload"), "--unit", UNIT.name, "--out", str(tmp_path / "out")
    )
    assert graded.returncode == 2 and not (tmp_path / "out").exists(), graded.stdout + graded.stderr
    assert "install bubblewrap (apt-get install bubblewrap)" in graded.stderr
    assert f"{private} lets no other user pass" in graded.stderr and f"chmod o+x {private}" in graded.stderr
    assert "grade as root" not in graded.stderr  # it is root already

    (tmp_path / "class").mkdir()
    with zipfile.ZipFile(tmp_path / "class" / "alice.zip", "w") as upload:
        for file in UNIT.files:
            upload.write(tmp_path / "upload" / file, file)
    batch = _autograder(
        python, env, "grade-all", str(tmp_path / "class"), "--unit", UNIT.name, "--out", str(tmp_path / "graded")
    )
    assert batch.returncode == 2 and "install bubblewrap" in batch.stderr, batch.stdout + batch.stderr
    assert not (tmp_path / "graded" / "results").exists()  # refused before any grading


def test_the_reference_is_graded_without_a_sandbox(fresh, tmp_path):
    python, env, _ = fresh
    run = _autograder(python, env, "reference", "--unit", UNIT.name, "--out", str(tmp_path / "out"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "trusted code, run without a sandbox" in run.stderr
    assert (tmp_path / "out" / UNIT.name / "results.json").exists()


@pytest.mark.parametrize(
    "root, bwrap, says, not_said",
    [
        (False, False, "Install bubblewrap", "lets no other user pass"),
        (False, True, "unprivileged user namespaces", "Install bubblewrap"),
        (True, True, "namespaces", "Install bubblewrap"),
    ],
)
def test_the_cure_fits_the_machine(root, bwrap, says, not_said):
    cure = sandbox.cure(root, bwrap, ["/usr/bin/env"])
    assert says in cure and not_said not in cure
