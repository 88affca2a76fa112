"""The runtime is one versioned package: notebooks pin it, a release carries its wheel, and a
Python that has never seen this checkout installs it from the release, as Colab does."""

import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile

import nbformat
import pytest

import course
from course.authoring import release, runtime_package
from course.authoring.generate import notebook_paths
from course.spec import units

UNITS = units.all_units()
PIN = re.compile(r"^RUNTIME = '([^']+)'", re.M)


def _pin(path: str) -> str:
    notebook = nbformat.read(path, as_version=4)
    first = next(cell for cell in notebook.cells if cell.cell_type == "code")
    found = PIN.search(first.source)
    assert found and "_COURSE_FILES" not in first.source, f"{path}: the first code cell pins no runtime"
    return found.group(1)


def test_the_version_is_the_digest_of_the_runtime_modules():
    assert course.__version__ == runtime_package.runtime_version()
    assert re.fullmatch(r"\d+\.\d+\+[0-9a-f]{12}", course.__version__)
    modules = runtime_package.runtime_modules()
    assert "course/notebook.py" in modules and not any("/authoring/" in path for path in modules)


@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_each_notebook_pins_the_package_and_embeds_no_runtime_source(unit):
    for path in notebook_paths(unit):
        assert _pin(path) == course.__version__
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        assert "def judge(" not in text and "def build_and_load(" not in text, f"{path} embeds runtime source"


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "students"
    release.write([units.load("day01_relu_bias"), units.load("day02_layernorm_forward")], str(out))
    return out


def test_the_release_carries_the_wheel_its_notebooks_pin(released):
    wheel = released / "runtime" / runtime_package.wheel_name(course.__version__)
    assert _pin(str(released / "notebooks" / "day02_layernorm_forward.ipynb")) == course.__version__
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        record = archive.read(next(name for name in names if name.endswith("/RECORD"))).decode()
    assert {
        "course/notebook.py",
        "course/_version.py",
        "course/units/day02_layernorm_forward/public_tests.py",
        "course/units/common/layernorm_tests.py",
    } <= names
    assert not any("hidden_tests" in name or "/authoring/" in name or name.startswith("autograder") for name in names)
    assert all(name in record for name in names)


def test_the_wheel_imports_nothing_it_does_not_hold(released, tmp_path):
    """Every runtime module and a public suite import from the wheel alone (with torch), never
    from this checkout."""
    target = tmp_path / "site"
    with zipfile.ZipFile(released / "runtime" / runtime_package.wheel_name(course.__version__)) as archive:
        archive.extractall(target)
    modules = [path.removesuffix(".py").replace("/", ".") for path in runtime_package.runtime_modules()]
    script = (
        f"import sys; sys.path[:0] = [{str(target)!r}, {sysconfig.get_paths()['purelib']!r}]\n"
        "import importlib, course, course.suites as suites\n"
        f"for name in {[m.removesuffix('.__init__') for m in modules]!r}: importlib.import_module(name)\n"
        f"assert course.__file__.startswith({str(target)!r}), course.__file__\n"
        "print(len(suites.import_suite(suites.public_root(), 'day02_layernorm_forward', hidden=False).CASES))\n"
    )
    # -S: no site processing, so no editable install of this checkout is on the path.
    done = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 0


def test_a_fresh_python_installs_the_runtime_from_the_release(released, tmp_path):
    """The notebook's first cell in a virtual environment that has never seen the course, with
    the release as its source (COURSE_RELEASE, as for offline use; Colab's is the repository)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    notebook = nbformat.read(released / "notebooks" / "day01_relu_bias.ipynb", as_version=4)
    cell = next(cell for cell in notebook.cells if cell.cell_type == "code").source
    check = "\nimport course.suites as suites\nprint(suites.public_root())"
    env = dict(os.environ, COURSE_RELEASE=str(released / "runtime"), PYTHONPATH="")
    for _ in range(2):  # the second run finds the version installed and installs nothing
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-c", cell + check], capture_output=True, text=True, cwd=tmp_path, env=env
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert f"course runtime {course.__version__}" in done.stdout
        assert str(venv) in done.stdout.splitlines()[-1]
    env["COURSE_RELEASE"] = str(tmp_path / "nowhere")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "course-runtime"], check=True)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", cell], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert done.returncode != 0 and "nowhere" in done.stderr


def test_the_submit_cell_records_the_student(tmp_path, monkeypatch, capsys):
    from course.notebook import submit

    monkeypatch.chdir(tmp_path)
    (tmp_path / "day01_relu_bias").mkdir()
    (tmp_path / "day01_relu_bias" / "relu_bias.cpp").write_text("// mine\n")
    with zipfile.ZipFile(submit("day01_relu_bias", ["relu_bias.cpp"], student=" s1234567 ")) as archive:
        manifest = json.loads(archive.read("manifest.json"))
    assert manifest["student"] == "s1234567" and "no STUDENT set" not in capsys.readouterr().out
    submit("day01_relu_bias", ["relu_bias.cpp"])
    assert "no STUDENT set" in capsys.readouterr().out
