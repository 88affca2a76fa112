"""The Gradescope autograder zip: run_autograder, unpacked into a fake /autograder tree,
grades an upload on the CPU and writes a results.json Gradescope accepts."""
import json
import os
import subprocess
import sys
import zipfile

import pytest

from autograder import gradescope
from autograder.__main__ import main
from course.spec import units

pytestmark = pytest.mark.autograder
UNIT = units.load("day01_relu_bias")
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}


def _autograder_tree(tmp_path):
    """/autograder as Gradescope lays it out: the zip unpacked in source/, run_autograder
    beside it, the upload in submission/."""
    archive = tmp_path / "autograder.zip"
    assert main(["gradescope", UNIT.name, str(archive)]) == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(archive) as bundle:
        bundle.extractall(root / "source")
        assert bundle.getinfo("run_autograder").external_attr >> 16 & 0o100  # executable
    (root / "run_autograder").write_bytes((root / "source" / "run_autograder").read_bytes())
    return root


def _check_results(path) -> dict:
    """The parts of Gradescope's results.json format this grader writes."""
    data = json.loads(path.read_text())
    assert isinstance(data["score"], (int, float)) and isinstance(data["output"], str)
    for test in data["tests"]:
        assert {"name", "score", "max_score", "status", "output", "visibility"} <= set(test)
        assert test["status"] in {"passed", "failed"} and test["visibility"] in VISIBILITIES
        assert 0 <= test["score"] <= test["max_score"]
    assert data["score"] == pytest.approx(sum(t["score"] for t in data["tests"]), abs=0.01)
    return data


def test_run_autograder_grades_the_cpu_paths_of_an_upload(tmp_path):
    root = _autograder_tree(tmp_path)
    assert not (root / "source" / "solutions" / "day02_layernorm_forward").exists()  # only what the unit needs
    for kept_back in ("answers.md", "mutants.toml", "planted_bugs.toml"):  # never read by grading
        assert not list((root / "source").rglob(kept_back)), kept_back
    assert subprocess.run(["bash", "-n", str(root / "source" / "setup.sh")]).returncode == 0
    assert "sys.version_info < (3, 11)" in (root / "source" / "setup.sh").read_text()  # tomllib
    (root / "submission").mkdir()
    UNIT.write("solution", str(tmp_path / "reference"))
    with zipfile.ZipFile(root / "submission" / "submission_day01_relu_bias.zip", "w") as z:
        for file in UNIT.files:
            z.write(tmp_path / "reference" / file, file)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADING_PYTHON": sys.executable}
    run = subprocess.run(["bash", str(root / "run_autograder")], env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    data = _check_results(root / "results" / "results.json")

    tests = {t["name"]: t for t in data["tests"]}
    cases = {case.name: case for case in UNIT.tests(hidden=True).CASES}
    assert tests["build"]["status"] == "passed"
    assert set(tests) - {"build"} == set(gradescope.cases_on_submit(UNIT))
    cpu = [name for name in tests if name in cases and cases[name].device == "cpu"]
    assert cpu and all(tests[name]["status"] == "passed" for name in cpu)
    public_cuda = [name for name in tests if name in cases and cases[name].device == "cuda"]
    assert public_cuda and all(tests[name]["output"].startswith("not run") for name in public_cuda)
    assert "GPU" in data["output"] and gradescope.NOTE in data["output"]


def test_an_unreadable_upload_is_a_failed_build_the_student_sees(tmp_path):
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "relu_bias.zip").write_bytes(b"not a zip")
    code = gradescope.main(["--unit", UNIT.name, "--submission", str(tmp_path / "submission"),
                            "--results", str(tmp_path / "results")])
    data = _check_results(tmp_path / "results" / "results.json")
    build = data["tests"][0]
    assert code == 0 and build["name"] == "build" and build["status"] == "failed"
    assert build["visibility"] == "visible" and "could not be read" in build["output"]
