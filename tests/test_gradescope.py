"""The Gradescope autograder zip, as Gradescope uses it: unpacked into a fake /autograder,
setup.sh's install steps run into a virtual environment of their own (no editable install,
no developer interpreter), then run_autograder grades an upload on the CPU and writes a
results.json that Gradescope's specification accepts."""

import json
import os
import subprocess
import time
import zipfile

import clean_venv
import pytest

from autograder import gradescope, results
from autograder.__main__ import main
from course.spec import answer_key, units

pytestmark = pytest.mark.autograder
UNIT = units.load("day01_relu_bias")
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}
TEST_KEYS = {
    "score",
    "max_score",
    "status",
    "name",
    "name_format",
    "number",
    "output",
    "output_format",
    "tags",
    "visibility",
    "extra_data",
}
TOP_KEYS = {
    "score",
    "execution_time",
    "output",
    "output_format",
    "test_output_format",
    "test_name_format",
    "visibility",
    "stdout_visibility",
    "extra_data",
    "tests",
    "leaderboard",
}


def check_gradescope_spec(data: dict) -> None:
    """Gradescope's results.json specification: the keys it knows, their types and values."""
    assert set(data) <= TOP_KEYS, set(data) - TOP_KEYS
    assert "score" in data or all("score" in t for t in data["tests"])  # one or the other is required
    assert isinstance(data.get("score", 0), (int, float)) and isinstance(data.get("execution_time", 0), (int, float))
    assert isinstance(data.get("output", ""), str) and isinstance(data["tests"], list)
    for key in ("visibility", "stdout_visibility"):
        assert data.get(key, "visible") in VISIBILITIES
    for test in data["tests"]:
        assert set(test) <= TEST_KEYS, set(test) - TEST_KEYS
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
        assert isinstance(test["score"], (int, float)) and isinstance(test["max_score"], (int, float))
        assert 0 <= test["score"] <= test["max_score"], test
        assert test.get("status", "passed") in {"passed", "failed"}
        assert test.get("visibility", "visible") in VISIBILITIES and test.get("output_format", "text") in FORMATS
        assert isinstance(test.get("tags", []), list) and isinstance(test.get("extra_data", {}), dict)
    assert data["score"] == pytest.approx(sum(t["score"] for t in data["tests"]), abs=0.01)


def _unpacked(tmp_path):
    """/autograder as Gradescope lays it out: the zip in source/, run_autograder copied beside it."""
    archive = tmp_path / "autograder.zip"
    assert main(["gradescope", UNIT.name, str(archive)]) == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(archive) as bundle:
        names = set(bundle.namelist())
        for script in ("setup.sh", "run_autograder"):
            assert bundle.getinfo(script).external_attr >> 16 & 0o100, script  # executable
        bundle.extractall(root / "source")
    assert {
        "setup.sh",
        "run_autograder",
        "pyproject.toml",
        "autograder/gradescope.py",
        f"solutions/{UNIT.name}/unit.toml",
    } <= names
    assert not any(name.startswith("source/") for name in names)  # the zip's root is Gradescope's source/
    for script in ("setup.sh", "run_autograder"):
        os.chmod(root / "source" / script, 0o755)  # zipfile's extractall keeps no mode
    (root / "run_autograder").write_bytes((root / "source" / "run_autograder").read_bytes())
    os.chmod(root / "run_autograder", 0o755)
    return root


def test_the_zip_holds_the_project_the_unit_needs_and_nothing_kept_back(tmp_path):
    root = _unpacked(tmp_path)
    source = root / "source"
    assert not (source / "solutions" / "day02_layernorm_forward").exists()  # only what the unit needs
    for kept_back in ("answers.md", "mutants.toml", "planted_bugs.toml", "hostile"):  # never read by grading
        assert not list(source.rglob(kept_back)), kept_back
    # The written answers' points come without the key: the copy grades them out of the same points.
    copy = units.load(UNIT.name, str(source))
    assert answer_key.answer_key(copy) == {} and answer_key.points(copy) == answer_key.points(UNIT)
    assert "Rubric" not in (source / "solutions" / UNIT.name / answer_key.POINTS_FILE).read_text()
    assert subprocess.run(["bash", "-n", str(source / "setup.sh")]).returncode == 0
    assert "sys.version_info < (3, 11)" in (source / "setup.sh").read_text()  # tomllib
    assert "MAX_JOBS=1" in (root / "run_autograder").read_text()


def test_gpu_cases_are_one_note_not_failures():
    cases = {case.name: case for case in UNIT.tests(hidden=True).CASES}
    cpu = next(name for name, case in cases.items() if case.device == "cpu")
    cuda = [name for name, case in cases.items() if case.device == "cuda"][:2]
    graded = [results.TestResult("build", 1, True, ""), results.TestResult(cpu, 2, False, "wrong values")]
    graded += [results.TestResult(name, 2, False, "not run: no GPU", not_run=True) for name in cuda]
    result = results.Grade(UNIT.name, graded)
    tests = {test.name: test for test in gradescope.gpu_cases_later(result, UNIT).tests}
    assert set(tests) == {"build", cpu, gradescope.GPU_ENTRY}  # a failed CPU case stays a failure
    note = tests[gradescope.GPU_ENTRY]
    assert note.max_score == 0 and note.passed and note.visibility == "visible"
    assert all(name in note.output for name in cuda) and "batch" in note.output


def test_run_autograder_grades_an_upload_with_what_setup_installed(tmp_path):
    root = _unpacked(tmp_path)
    venv = tmp_path / "grader-venv"
    started = time.monotonic()
    # torch as an image that has it installed already (unpacking a CUDA torch into a new venv
    # costs minutes of disk writes and proves nothing of the grader); setup.sh's pin still checks
    # its version. The grader itself goes into the venv, not editable.
    install = clean_venv.env(
        GRADER_VENV=str(venv),
        GRADER_BASE_PYTHON=clean_venv.base_python(),
        GRADER_VENV_OPTIONS="--system-site-packages",
        SKIP_SYSTEM_PACKAGES="1",
        TORCH_INDEX_URL="",
    )
    setup = subprocess.run(
        ["bash", str(root / "source" / "setup.sh")],
        cwd=root / "source",
        env=install,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    print(f"setup.sh's install steps: {time.monotonic() - started:.0f} s")
    python = str(venv / "bin" / "python")
    installed = clean_venv.where_installed(python, "autograder", str(tmp_path), clean_venv.env())
    assert installed.startswith(str(venv)) and "site-packages" in installed, installed  # not this checkout
    editable = subprocess.run([python, "-m", "pip", "list", "--editable"], capture_output=True, text=True).stdout
    assert "cuda-extensions-course" not in editable

    (root / "submission").mkdir()
    UNIT.write("solution", str(tmp_path / "reference"))
    with zipfile.ZipFile(root / "submission" / "submission_day01_relu_bias.zip", "w") as upload:
        for file in UNIT.files:
            upload.write(tmp_path / "reference" / file, file)
    run = subprocess.run(
        [str(root / "run_autograder")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1200,
        env=clean_venv.env(AUTOGRADER_ROOT=str(root), GRADER_VENV=str(venv)),
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    print(f"setup and grading: {time.monotonic() - started:.0f} s")
    data = json.loads((root / "results" / "results.json").read_text())
    check_gradescope_spec(data)

    tests = {t["name"]: t for t in data["tests"]}
    cases = {case.name: case for case in UNIT.tests(hidden=True).CASES}
    assert tests["build"]["status"] == "passed"
    assert all(t["status"] == "passed" for t in tests.values()), [
        n for n, t in tests.items() if t["status"] != "passed"
    ]
    cpu = {name for name in gradescope.cases_on_submit(UNIT) if cases[name].device == "cpu"}
    assert cpu and set(tests) == {"build", gradescope.GPU_ENTRY, *cpu}
    note = tests[gradescope.GPU_ENTRY]
    assert note["max_score"] == 0 and note["visibility"] == "visible" and "batch" in note["output"]
    assert gradescope.NOTE in data["output"]


def test_an_unreadable_upload_is_a_failed_build_the_student_sees(tmp_path):
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "relu_bias.zip").write_bytes(b"not a zip")
    code = gradescope.main(
        ["--unit", UNIT.name, "--submission", str(tmp_path / "submission"), "--results", str(tmp_path / "results")]
    )
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    check_gradescope_spec(data)
    build = data["tests"][0]
    assert code == 0 and build["name"] == "build" and build["status"] == "failed"
    assert build["visibility"] == "visible" and "could not be read" in build["output"]
