"""TODO gating: a COURSE_TODO blocks only the path it stands in (and, where the op names its
functions, only the ops that run it), and the public test run lists every TODO once and names,
per refused case, the functions it needs."""

import os
import shutil
import subprocess

import pytest

from course.public import _failure, remaining_todos
from course.spec import units
from course.todos import todo_lines

COMMON = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "solutions", "common")

# Markers as a .cpp file and a kernel file would hold them (#line renames the file the
# compiler sees, as a .cu file's own markers would be named), then what each path reports.
PROGRAM = r"""
#include <cstdio>
#include "course_todo.h"
COURSE_TODO("day09: op.cpp, check_inputs: shared");
COURSE_TODO_CPU("day09: op.cpp, op_cpu: cpu only");
COURSE_TODO_CUDA("day09: op.cpp, op_cuda: cuda only");
#line 1 "op_kernel.cu"
COURSE_TODO("day09: op_kernel.cu, kernel: in a kernel file");
#line 20 "row.cuh"
COURSE_TODO("day09: row.cuh, TORCH_LIBRARY(ns, m): a header two kernel files include");
#line 30 "row.cuh"
COURSE_TODO("day09: row.cuh, TORCH_LIBRARY(ns, m): a header two kernel files include");
struct Fake { bool cuda; bool is_cuda() const { return cuda; } };
int main() {
  std::printf("[cpu]\n%s[cuda]\n%s[any]\n%s", course::todos_blocking(Fake{false}).c_str(),
              course::todos_blocking(Fake{true}).c_str(), course::pending_todo_message().c_str());
  // An op that names its functions waits on those alone, on its own path.
  std::printf("[cuda kernel]\n%s", course::todos_of(Fake{true}, {"kernel", "TORCH_LIBRARY(ns, m)"}).c_str());
  std::printf("[cpu kernel]\n%s", course::todos_of(Fake{false}, {"kernel", "op_cpu"}).c_str());
  std::printf("[cuda op_cpu]\n%s", course::todos_of(Fake{true}, {"op_cpu"}).c_str());
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ here")
def test_a_todo_blocks_only_the_path_it_stands_in(tmp_path):
    (tmp_path / "todos.cpp").write_text(PROGRAM)
    subprocess.run(["g++", "-std=c++17", "-I", COMMON, "todos.cpp", "-o", "todos"], cwd=tmp_path, check=True)
    output = subprocess.run([str(tmp_path / "todos")], capture_output=True, text=True, check=True).stdout
    sections = dict(part.split("]\n", 1) for part in output.split("[")[1:])
    names = {path: [line.split(", ")[1].split(":")[0] for line in text.splitlines()] for path, text in sections.items()}
    schema = "TORCH_LIBRARY(ns"  # the function's own ", " ends this split early
    assert names == {
        "cpu": ["check_inputs", "op_cpu"],
        "cuda": ["check_inputs", "op_cuda", "kernel", schema],
        "any": ["check_inputs", "op_cpu", "op_cuda", "kernel", schema],
        "cuda kernel": ["kernel", schema],
        "cpu kernel": ["op_cpu"],
        "cuda op_cpu": [],
    }


def test_the_list_holds_every_todo_of_the_template_in_file_order_and_none_of_the_solution(tmp_path):
    unit = units.load("day03_layernorm_backward")
    unit.write("template", str(tmp_path / "template"))
    unit.write("solution", str(tmp_path / "solution"))
    todos = remaining_todos(str(tmp_path / "template"), list(unit.files))
    files = [todo.split(": ", 1)[1].split(",")[0] for todo in todos]
    assert files == sorted(files, key=list(unit.files).index)
    assert {"layernorm_backward.cu", "layernorm.cpp", "layernorm.py"} <= set(files)
    assert all(todo.startswith("TODO(day03): ") for todo in todos)
    assert remaining_todos(str(tmp_path / "solution"), list(unit.files)) == []


def test_a_refused_case_names_the_functions_it_needs():
    error = RuntimeError(
        "this op is not finished yet:\n"
        "TODO(day02): layernorm.cpp, check_inputs: check device, dtype, layout, then delete this line\n"
        "TODO(day02): layernorm_forward.cu, layernorm_forward_kernel: compute mean: then delete\n"
        "TODO(day09): rmsnorm_ops.cpp, TORCH_LIBRARY(rmsnorm_int8, m): the schema (Tensor(a!)), then delete\n"
    )
    assert _failure(error).message == (
        "needs check_inputs (layernorm.cpp): TODO(day02) still to write\n"
        "needs layernorm_forward_kernel (layernorm_forward.cu): TODO(day02) still to write\n"
        "needs TORCH_LIBRARY(rmsnorm_int8, m) (rmsnorm_ops.cpp): TODO(day09) still to write"
    )
    assert _failure(RuntimeError("x must be 2-D")).message.startswith("RuntimeError: x must be 2-D")


def test_a_day01_student_with_only_the_kernel_left_passes_the_cpu_tests(tmp_path):
    """The reference with its kernel's TODO put back: the CPU cases pass, and a CUDA case (on a
    GPU) fails naming that TODO and nothing else."""
    import torch

    from course.loading import build_and_load
    from course.public import run_case

    unit = units.load("day01_relu_bias")
    source = tmp_path / "src"
    unit.write("solution", str(source))
    kernel = source / "relu_bias.cu"
    kernel.write_text(kernel.read_text() + '\nCOURSE_TODO("day01: relu_bias.cu, relu_bias_kernel: the kernel");\n')
    module, _ = build_and_load(unit.plan(), str(source), str(tmp_path / "build"))
    spec = unit.tests(hidden=False)
    devices = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
    for case in spec.CASES:
        if case.device in devices and case.kind == "values":
            verdict = run_case(spec, module, case, seed=3)
            if case.device == "cpu":
                assert verdict.passed, (case.name, verdict.message)
            else:
                needs = "needs relu_bias_kernel (relu_bias.cu): TODO(day01) still to write"
                assert verdict.message == needs, verdict.message


def test_a_config_file_todo_is_a_quoted_value_and_a_commented_one_is_none():
    """TOML and YAML hold their TODOs as quoted values, so that the file still parses: pip, or a
    CI step, then shows the TODO. One in a comment is prose."""
    text = '# "TODO(day07): a.toml, x: only mentioned"\nrequires = ["TODO(day07): a.toml, [build-system]: write it"]\n'
    assert todo_lines("a.toml", text) == ["TODO(day07): a.toml, [build-system]: write it"]
    step = '      run: |\n        echo "TODO(day07): ci.yml, build the wheel: pip wheel"\n'
    assert todo_lines("ci.yml", step) == ["TODO(day07): ci.yml, build the wheel: pip wheel"]
