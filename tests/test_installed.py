"""`pip install .` (not editable) into a fresh virtual environment, then the grader run from a
folder outside the checkout: it finds the units in the installed package and grades one."""

import json
import os
import subprocess

import clean_venv
import pytest

pytestmark = pytest.mark.autograder
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNIT = "day01_relu_bias"


def test_an_installed_grader_finds_its_units_and_grades_a_reference(tmp_path):
    venv = tmp_path / "venv"
    python = clean_venv.create(str(venv), system_site_packages=True)  # torch and the rest from this machine
    env = clean_venv.env(str(venv))
    install = subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", CHECKOUT],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    package = clean_venv.where_installed(python, "autograder", str(elsewhere), env)
    assert package.startswith(str(venv)) and "site-packages" in package, package  # not this checkout
    assert os.path.isfile(os.path.join(package, "solutions", UNIT, "unit.toml"))
    assert not os.path.exists(os.path.join(os.path.dirname(package), "solutions"))  # no top-level folder

    run = subprocess.run(
        [python, "-m", "autograder", "reference", "--unit", UNIT, "--out", "out"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    data = json.loads((elsewhere / "out" / UNIT / "results.json").read_text())
    assert data["tests"] and all(
        t["status"] == "passed" for t in data["tests"] if not t["output"].startswith("not run")
    )
    assert data["score"] > 0
