"""Which float dtype Triton cases run in (course/dtypes.py): the choice from a GPU's capability
and Triton's version, injected here, and the notebook's runner and the grader choosing alike.
No GPU, no build, no child process."""

import dataclasses
import importlib.metadata
import json
import types

import pytest
import torch
from conftest import HAS_GPU
from helpers import built_unit, load_spec, timed_marks

from autograder import machine
from autograder.grade_options import GradeOptions
from autograder.results import Grade
from autograder.stages.grading import open_grading
from autograder.stages.plan import plan_cases
from autograder.stages.report import report_cases
from autograder.stages.run import Ran
from course import dtypes
from course.authoring.generate import lesson_cells
from course.cases import Case, make_input_sets
from course.dtypes import Toolchain, ToolchainSuite, for_toolchain, triton_float_dtype
from course.judge import Verdict
from course.ops import Op
from course.public import run_case, run_cases
from course.spec import units

BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32
DAY09 = units.load("day09_rmsnorm_int8")
T4_OLD_TRITON = Toolchain((7, 5), (3, 2))


def _triton_case(dtype=BF16, kind="values", triton=True, **params):
    return Case("triton_op", "triton_op", "cuda", 2.0, dict(dtype=dtype, shape=(4, 8), **params), kind, triton=triton)


@pytest.mark.parametrize(
    "capability, triton, expected, software",
    [
        ((7, 5), (3, 0), FP16, False),  # torch 2.4 on a T4
        ((7, 5), (3, 2), FP16, False),  # torch 2.6 on a T4
        ((7, 5), (3, 3), BF16, True),  # torch 2.7 on a T4: converted in software
        ((7, 5), (3, 6), BF16, True),  # torch 2.10 and 2.11, Colab's
        ((8, 0), (3, 0), BF16, False),  # an A100 with any Triton
        ((9, 0), (3, 2), BF16, False),
        (None, (3, 2), BF16, False),  # no GPU: no Triton case runs, nothing to change
        ((7, 5), None, BF16, False),  # no Triton: likewise
    ],
)
def test_bf16_where_the_gpu_or_triton_can_compile_it(capability, triton, expected, software):
    choice = triton_float_dtype(Toolchain(capability, triton))
    assert choice.dtype == expected
    assert ("in software" in choice.why) == software
    assert bool(choice.why) == (expected == FP16 or software)


def test_fp16_says_which_triton_and_gpu_and_what_would_do():
    why = triton_float_dtype(T4_OLD_TRITON).why
    assert "Triton 3.2" in why and "sm_75" in why and "sm_80" in why and "Triton 3.3 and later" in why


def _fake_triton(monkeypatch, version: str | None):
    def installed(name):
        if version is None or name != "triton":
            raise importlib.metadata.PackageNotFoundError(name)
        return version

    monkeypatch.setattr(dtypes.importlib.metadata, "version", installed)


def _fake_gpu(monkeypatch, capability):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)


def test_the_notebooks_toolchain_is_its_gpu_and_installed_triton(monkeypatch):
    _fake_gpu(monkeypatch, (7, 5))
    _fake_triton(monkeypatch, "3.2.0")
    assert Toolchain.here() == T4_OLD_TRITON
    _fake_triton(monkeypatch, "3.6.0+git9a3b2c1")
    assert Toolchain.here().triton == (3, 6)
    _fake_triton(monkeypatch, None)
    assert Toolchain.here().triton is None


def test_the_graders_toolchain_is_the_probes_capability(monkeypatch):
    _fake_triton(monkeypatch, "3.2.0")
    assert Toolchain.for_capability("7.5") == T4_OLD_TRITON
    assert Toolchain.for_capability(None).capability is None
    with pytest.raises(ValueError, match="capability"):
        Toolchain.for_capability("sm75")


def test_a_triton_bf16_case_runs_in_fp16_under_its_name_and_points_and_says_why():
    case = _triton_case()
    ran = for_toolchain(case, T4_OLD_TRITON)
    assert ran.params["dtype"] == FP16 and case.params["dtype"] == BF16
    assert (ran.name, ran.points, ran.group, ran.params["shape"]) == (case.name, case.points, case.group, (4, 8))
    assert ran.note.startswith("ran in fp16, not bf16: Triton 3.2 cannot compile bf16 for sm_75")


def test_other_cases_run_as_declared():
    for case in (_triton_case(triton=False), _triton_case(FP32), _triton_case(FP16)):
        assert for_toolchain(case, T4_OLD_TRITON) is case
    ampere = _triton_case()
    assert for_toolchain(ampere, Toolchain((8, 0), (3, 2))) is ampere


def test_bf16_in_software_keeps_bf16_and_says_so():
    ran = for_toolchain(_triton_case(kind="perf"), Toolchain((7, 5), (3, 3)))
    assert ran.params["dtype"] == BF16
    assert "in software" in ran.note and "timed against ran in bf16 too" in ran.note


@pytest.mark.parametrize("toolchain, dtype", [(T4_OLD_TRITON, FP16), (Toolchain((7, 5), (3, 3)), BF16)])
def test_a_perf_cases_baseline_runs_in_the_dtype_the_case_ran_in(toolchain, dtype):
    """day09's baselines (torch's op; the reference is timed on the same input sets) take the
    case's own inputs: F.rms_norm's gradients come back in the dtype the case ran in."""
    suite = ToolchainSuite(DAY09.tests(hidden=True), toolchain)
    perf = next(case for case in suite.CASES if case.name == "triton_perf_autograd_bf16")
    small = dataclasses.replace(perf, params={**perf.params, "shape": (4, 64), "input_sets": 1})
    (inputs,) = make_input_sets(suite, small, seed=1)
    assert inputs["x"].dtype == dtype
    assert {grad.dtype for grad in suite.baseline(inputs)} == {dtype}


def test_the_suite_seen_through_a_toolchain_is_the_suite_but_for_its_cases():
    hidden = DAY09.tests(hidden=True)
    suite = ToolchainSuite(ToolchainSuite(hidden, T4_OLD_TRITON), T4_OLD_TRITON)
    assert suite.suite is hidden and suite.OPS is hidden.OPS and suite.baseline is hidden.baseline
    assert [c.name for c in suite.CASES] == [c.name for c in hidden.CASES]
    changed = {c.name for c in suite.CASES if c.note}
    assert "triton_quant_bf16" in changed and "cuda_quant_bf16" not in changed  # nvcc compiles bf16 for sm_75
    assert all(c.name.startswith("triton_") for c in suite.CASES if c.note)
    assert not hasattr(suite, "no_such_thing")


def test_the_public_runner_and_the_grader_run_a_case_alike_on_a_t4_with_triton_3_2(monkeypatch, tmp_path):
    """The notebook asks its own GPU; the grader asks a child (its probe's answer here, as
    grade-all hands it over) and plans the hidden suite."""
    _fake_triton(monkeypatch, "3.2.0")
    _fake_gpu(monkeypatch, (7, 5))
    notebook = ToolchainSuite(DAY09.tests(hidden=False), Toolchain.here())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "t4-under-test")
    monkeypatch.setenv(machine.GPU_PROBE_ENV, json.dumps(["t4-under-test", "7.5", 1]))
    options = GradeOptions(work=str(tmp_path), sandbox_mode="none", seed=1)
    try:
        with open_grading(DAY09, options) as grading:
            plan = plan_cases(
                DAY09.tests(hidden=True), ("triton_quant_bf16",), grading.has_gpu, grading.gpus, grading.toolchain
            )
    finally:
        machine.gpus_of.cache_clear()
    ((index, graded),) = plan.groups[0].cases
    public = next(case for case in notebook.CASES if case.name == "triton_quant_bf16")
    assert graded == public and graded.params["dtype"] == FP16 and graded.points == 1.0
    # the report shows the note beside the verdict
    result = Grade(DAY09.name)
    report_cases(result, plan, Ran({index: Verdict(True)}, {}), {"triton_quant_bf16"})
    assert result.tests[0].output == graded.note and result.tests[0].passed


def test_the_public_runner_prints_what_ran_and_why(monkeypatch, capsys):
    _fake_triton(monkeypatch, "3.2.0")
    _fake_gpu(monkeypatch, (7, 5))
    seen = []
    op = Op(
        lambda ext, inputs: seen.append(inputs["x"].dtype) or (inputs["x"] * 2,),
        lambda inputs: (inputs["x"].double() * 2,),
        ("y",),
        lambda inputs: (inputs["x"].dtype,),
        lambda inputs: (0.0, 0.0),
    )
    suite = types.SimpleNamespace(
        CASES=[Case("cpu_double_bf16", "cpu", "cpu", params=dict(dtype=BF16, shape=(4,)), triton=True)],
        make_inputs=lambda case, generator: {
            "op": "double",
            "x": torch.ones(case.params["shape"]).to(case.params["dtype"]),
        },
        OPS={"double": op},
    )
    assert run_cases(suite, ext=None, seed=1, devices=("cpu",))
    printed = capsys.readouterr().out
    assert seen and set(seen) == {FP16}
    assert "PASS  cpu_double_bf16" in printed and "ran in fp16, not bf16: Triton 3.2" in printed


@pytest.mark.parametrize("unit", ["day08_triton_basics", "day09_rmsnorm_int8"])
def test_the_lesson_says_why_triton_bf16_cases_may_run_in_fp16(unit):
    """Every unit with a Triton case declared bf16 tells students what a T4 runs instead."""
    loaded = units.load(unit)
    assert any(c.triton and c.params.get("dtype") == BF16 for c in loaded.tests(hidden=True).CASES)
    notebook = lesson_cells(loaded, solved=False)
    prose = " ".join(" ".join(cell.source.split()) for cell in notebook.cells if cell.cell_type == "markdown")
    threshold = "Triton {}.{}".format(*dtypes.BF16_TRITON)
    assert f"{threshold} and later" in prose and "run in fp16" in prose and "same points" in prose


def _triton_bf16_cases():
    """Every Triton case declared bf16, perf cases last (they run alone: `timed`)."""
    for name in ("day08_triton_basics", "day09_rmsnorm_int8"):
        cases = [c for c in load_spec(name).CASES if c.triton and c.params.get("dtype") == BF16]
        for case in sorted(cases, key=lambda c: c.kind == "perf"):
            marks = [pytest.mark.gpu, *timed_marks([case])]
            yield pytest.param(name, case, id=f"{name}:{case.name}", marks=marks)


@pytest.mark.skipif(not HAS_GPU, reason="runs the reference's Triton kernels")
@pytest.mark.parametrize("unit, case", list(_triton_bf16_cases()))
def test_the_reference_passes_the_triton_bf16_cases_as_a_t4_with_triton_3_2_runs_them(unit, case, build_root):
    """In fp16, on the GPU here: the tolerances, ties and perf thresholds hold there too."""
    module, _ = built_unit(unit, "solution", build_root)
    suite = ToolchainSuite(load_spec(unit), T4_OLD_TRITON)
    ran = for_toolchain(case, T4_OLD_TRITON)
    assert ran.params["dtype"] == FP16
    verdict = run_case(suite, module, ran, seed=1234)
    assert verdict.passed, verdict.message
