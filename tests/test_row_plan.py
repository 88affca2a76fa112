"""day05's plan_rows is host code: compiled here with g++ and checked for every row length
(tests/row_plan_check.cpp), since a wrong plan would show only on a GPU."""

import os
import shutil
import subprocess

import pytest

from course.spec import units

pytestmark = pytest.mark.day05
CUDA_INCLUDE = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include")


@pytest.mark.skipif(
    shutil.which("g++") is None or not os.path.isdir(CUDA_INCLUDE), reason="needs g++ and the CUDA headers"
)
def test_every_planned_row_is_covered_exactly_once(tmp_path):
    units.load("day05_layernorm_performance").write("solution", str(tmp_path / "src"))
    binary = tmp_path / "row_plan_check"
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "row_plan_check.cpp")
    subprocess.run(
        ["g++", "-std=c++17", "-O2", f"-I{tmp_path / 'src'}", f"-I{CUDA_INCLUDE}", source, "-o", str(binary)],
        check=True,
        capture_output=True,
        text=True,
    )
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout[-3000:]
