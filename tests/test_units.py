"""Every unit: the reference passes every case here, the starter code builds and fails
with its TODO messages, and the kernels compile for Turing (Colab's T4) and Hopper, the
reference ones without register spills."""

import re
import subprocess

import pytest
from conftest import HAS_GPU, device_marks
from helpers import built_unit, load_spec, skip_without_gpu_if_gpu_only, timed_marks, waits_in_template

from course.public import run_case
from course.sanitize import SANITIZER
from course.spec import units

UNITS = [u for u in units.all_units() if u.has_tests()]
DEVICES = ("cpu", "cuda") if HAS_GPU else ("cpu",)


def _new_process(unit) -> set[str]:
    """The cases that start a new Python (seconds each): the gradings of the reference and the
    template run them (tests/test_autograder.py), not these tests again."""
    return set(getattr(load_spec(unit.name), "NEW_PROCESS_CASES", ()))


def _cases():
    for unit in UNITS:
        for case in load_spec(unit.name).CASES:
            if case.kind == SANITIZER:  # the autograder runs a tool over other cases (tests/test_sanitizer.py)
                continue
            if case.name in _new_process(unit):
                continue
            marks = [getattr(pytest.mark, unit.day), *device_marks(case.device), *timed_marks([case])]
            yield pytest.param(unit, case, id=f"{unit.name}:{case.name}", marks=marks)


@pytest.mark.parametrize("unit, case", list(_cases()))
def test_solution_passes(unit, case, build_root):
    module, _ = built_unit(unit.name, "solution", build_root)
    verdict = run_case(load_spec(unit.name), module, case, seed=1234)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_template_builds_and_fails_with_todo_messages(unit, build_root):
    """A case fails naming a TODO where one stands in its way, and passes otherwise: the
    template never gives a wrong answer. Every unit leaves CUDA TODOs; a CPU path without a C++
    TODO runs (days whose CPU code is given), and where the suite says which functions each op
    runs, exactly the cases that run none left to write pass."""
    skip_without_gpu_if_gpu_only(unit)
    module, _ = built_unit(unit.name, "buildable", build_root)  # a package's build files written
    spec = load_spec(unit.name)
    ran = []
    for case in load_spec(unit.name, public_only=True).CASES:
        if case.device in DEVICES and case.kind == "values" and case.name not in _new_process(unit):
            verdict = run_case(spec, module, case, seed=1)
            ran.append(verdict.passed)
            assert verdict.passed or f"TODO({unit.day})" in verdict.message, (case.name, verdict.message)
            if waits_in_template(unit, spec, case):
                assert not verdict.passed, f"{case.name} passed with a TODO in its way"
            elif hasattr(spec, "FUNCTIONS_RUN"):
                assert verdict.passed, (case.name, verdict.message)
    assert ran and not all(ran), "no public case names a TODO"


def _kernel_files():
    """Solutions for Turing and Hopper in one nvcc run (the front end parses once); templates for
    Hopper only (the template build test compiles them for Turing), and only where they differ
    from the solution."""
    for unit in UNITS:
        for file in unit.sources:
            if file.endswith(".cu"):
                yield pytest.param(unit, file, "solution", ("75", "90"), id=f"{unit.name}:{file}:solution")
                if unit.template(file) != unit.solution(file):
                    yield pytest.param(unit, file, "template", ("90",), id=f"{unit.name}:{file}:template:sm_90")


# A reference kernel may not spill registers: under a 1024-thread launch bound, day05's
# version 4 once spilled 344 bytes in bf16 and ran at half the bandwidth of fp16.


def _spill_loads(ptxas_report: str) -> dict[str, int]:
    """Bytes of spill loads per kernel and architecture ("kernel on sm_75"), from nvcc -Xptxas -v."""
    spills, kernel = {}, None
    for line in ptxas_report.splitlines():
        if match := re.search(r"Compiling entry function '(\S+)' for '(\w+)'", line):
            kernel = f"{match.group(1)} on {match.group(2)}"
        elif match := re.search(r"(\d+) bytes spill loads", line):
            spills[kernel] = int(match.group(1))
    return spills


def test_spills_are_read_per_kernel_and_architecture():
    report = (
        "ptxas info    : Compiling entry function '_Z1kv' for 'sm_75'\n"
        "    0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Compiling entry function '_Z1kv' for 'sm_90'\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    )
    assert _spill_loads(report) == {"_Z1kv on sm_75": 12, "_Z1kv on sm_90": 0}


@pytest.mark.parametrize("unit, file, kind, archs", list(_kernel_files()))
def test_kernel_compiles_for_turing_and_hopper(unit, file, kind, archs, nvcc, tmp_path):
    from torch.utils.cpp_extension import include_paths

    unit.write(kind, str(tmp_path))
    # --fatbin: device code only. The host side is compiled by every build of the unit; here
    # it would double the time for nothing ptxas reports.
    command = [
        nvcc,
        "--fatbin",
        "-O3",
        *(f"-gencode=arch=compute_{arch},code=sm_{arch}" for arch in archs),
        "-std=c++17",
        "-Xptxas",
        "-v",
        str(tmp_path / file),
        "-o",
        str(tmp_path / "kernel.fatbin"),
    ]
    # A kernel that reads torch's accessors or c10's types, itself or through a header of the unit's.
    headers = [tmp_path / file, *tmp_path.glob("*.h"), *tmp_path.glob("*.cuh")]
    if any(re.search(r"#include <(torch|ATen|c10)/", path.read_text()) for path in headers):
        command[5:5] = ["-std=c++20"] + [f"-I{p}" for p in include_paths()]
        command.remove("-std=c++17")
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    if kind == "solution":
        spilling = {k: b for k, b in _spill_loads(result.stderr).items() if b > 0}
        assert not spilling, f"register spills (bytes of spill loads): {spilling}"


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_rebuilding_in_the_same_process_runs_the_new_code(unit, tmp_path):
    """The notebook's loop: build the starter code, fill the TODOs, build again in the same
    Python process and folder. The second module must be the new code, with no old TODOs."""
    from course.loading import build_and_load

    skip_without_gpu_if_gpu_only(unit)
    spec = load_spec(unit.name)
    cases = [c for c in spec.CASES if c.device in DEVICES and c.kind == "values"]
    unit.write("buildable", str(tmp_path / "src"))  # a package's build files written
    module, _ = build_and_load(unit.plan(), str(tmp_path / "src"), str(tmp_path / "build"))
    # A case the starter code fails: its path holds a TODO (a CPU path given whole passes).
    blocked = [c for c in cases if not run_case(spec, module, c, seed=2).passed]
    assert blocked, "the starter code passed every case"
    unit.write("solution", str(tmp_path / "src"))
    module, _ = build_and_load(unit.plan(), str(tmp_path / "src"), str(tmp_path / "build"))
    for case in blocked[:3]:
        verdict = run_case(spec, module, case, seed=2)
        assert verdict.passed, (case.name, verdict.message)
