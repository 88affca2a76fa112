"""Feedback per function: a public test runs as soon as the functions its op runs are written
(the suite's FUNCTIONS_RUN table, course/todos.py), and until then names them; its op refuses
to run them, naming the same ones, so the grader fails such a case with that message."""

import ast
import contextlib
import io
import re
import textwrap

import pytest
import torch
from helpers import template_todos

from course.cases import make_input_sets
from course.judge import judge
from course.loading import build_and_load
from course.public import run_case, run_cases
from course.spec import regions, units
from course.todos import functions_needed, parse, todo_lines, unwritten, waiting_on

GATED = [unit for unit in units.all_units() if unit.has_tests and hasattr(unit.tests(hidden=False), "FUNCTIONS_RUN")]

# What a student has written first: every region of a file (""), or the functions named (each
# one's TODO region and the regions after it, up to the next function's). day02: the checks and
# the CPU loop, not the kernel; day03: the compiled backward and the autograd Function's forward;
# day04: the forward, not the backward's checks nor layer_norm; day05: version 2 and one byte
# count; day06: the forward kernel and the autograd Function's forward; day07: the packaging, the
# CPU kernels and the fake kernels, not the autograd kernel, the module, the version check nor CI; day09: the forward kernel and the CPU
# quantization (an operator), not the schema.
FORWARD_WRITTEN = {
    "day02_layernorm_forward": {"layernorm.cpp": ""},
    "day03_layernorm_backward": {"layernorm.cpp": "", "layernorm.py": ("LayerNormFunction.forward",)},
    "day04_layernorm_edge_cases": {
        "layernorm.cpp": ("row_major, num_rows and batch_shape", "check_x", "check_forward_inputs", "forward_cuda")
    },
    "day05_layernorm_performance": {"layernorm_forward_warp.cu": "", "layernorm.py": ("forward_bytes",)},
    "day06_bias_gelu": {"bias_gelu_forward.cu": "", "bias_gelu.py": ("BiasGeluFunction.forward",)},
    "day07_layernorm_package": {
        "pyproject.toml": "",
        "setup.py": "",
        "csrc/layernorm_ops.cpp": ("forward_cpu and backward_cpu",),
        "fast_layernorm/ops.py": "",
    },
    "day09_rmsnorm_int8": {"rmsnorm_forward.cu": "", "rmsnorm_ops.cpp": ("quantize_rows_cpu",)},
}

# With those written, what each public case waits on (a case left out waits on nothing).
GELU_GRADS = ["gelu_erf_grad", "gelu_tanh_grad"]
LAYERNORM_KERNEL = ["warp_reduce_sum", "layernorm_forward_kernel"]
DAY03_KERNELS = ["layernorm_backward_dx_kernel", "param_partials_kernel", "param_sums_kernel"]
DAY04_BACKWARD = ["check_backward_inputs", "layer_norm"]
VERSION_3 = ["layernorm_forward_vectorized_kernel", "launch_layernorm_forward_vectorized"]
DAY07_CUDA = "forward_cuda and backward_cuda"
MODULE = ["LayerNorm.__init__", "LayerNorm.forward"]
BACKWARD = ["bias_gelu_backward_kernel", "sum_strips_kernel"]
CUDA_QUANT = ["quantize_int8", "rms_norm_quant_kernel"]
TRITON_QUANT = ["rms_norm_quant_kernel", "rms_norm_quant_long_kernel"]
SCHEMA = "TORCH_LIBRARY(rmsnorm_int8, m)"
WAITING = {
    "day02_layernorm_forward": {
        name: LAYERNORM_KERNEL for name in ("cuda_fp32_small", "cuda_fp32_tail", "cuda_fp64_4097")
    },
    "day03_layernorm_backward": {
        "cuda_fp32_small": DAY03_KERNELS,
        "cuda_fp32_tail": DAY03_KERNELS,
        "cpu_layer_norm_fp32": ["LayerNormFunction.backward"],
        "cuda_layer_norm_fp32": [*DAY03_KERNELS, "LayerNormFunction.backward"],
        "cpu_gradcheck_fp64": ["LayerNormFunction.backward"],
        "cpu_frozen_params": ["LayerNormFunction.backward"],
    },
    "day04_layernorm_edge_cases": {
        **{
            f"{device}_bwd_{what}": DAY04_BACKWARD
            for device in ("cpu", "cuda")
            for what in ("d4097", "nd", "transposed", "empty", "fp16")
        },
        "cuda_bwd_current_stream": DAY04_BACKWARD,
    },
    "day05_layernorm_performance": {
        "cpu_backward_bytes_float32": ["backward_bytes"],
        "cuda_vectorized_fp32_d1024": VERSION_3,
        "cuda_vectorized_bf16_d4096": VERSION_3,
        "cuda_vectorized_misaligned": VERSION_3,
        "cuda_perf_fp32_d1024": VERSION_3,
    },
    "day06_bias_gelu": {
        "cpu_backward_erf_fp32": GELU_GRADS,
        "cpu_autograd_tanh_fp32": [*GELU_GRADS, "BiasGeluFunction.backward"],
        "cpu_gradcheck_tanh_fp64": [*GELU_GRADS, "BiasGeluFunction.backward"],
        "cuda_backward_erf_fp32": [*GELU_GRADS, *BACKWARD],
        "cuda_autograd_tanh_fp32": [*GELU_GRADS, *BACKWARD, "BiasGeluFunction.backward"],
    },
    "day07_layernorm_package": {
        "cpu_autograd_fp64": ["forward_autograd"],
        "cpu_opcheck_fp32": ["forward_autograd"],
        "cpu_compiled_block": ["forward_autograd", *MODULE],
        "cpu_state_dict_round_trip": MODULE,
        "cuda_forward_bf16": [DAY07_CUDA],
        "cuda_backward_fp32": [DAY07_CUDA],
        "cuda_autograd_fp32": [DAY07_CUDA, "forward_autograd"],
        "cuda_opcheck_fp16": [DAY07_CUDA, "forward_autograd"],
        "cuda_compiled_block": [DAY07_CUDA, "forward_autograd", *MODULE],
        "cuda_perf_autograd_fp32": [DAY07_CUDA, "forward_autograd"],
        "cpu_import_under_other_torch": ["check_torch_version"],
        "cpu_ci_workflow": ["build the wheel", "run the tests"],
    },
    "day09_rmsnorm_int8": {
        "cpu_residual_fp32": [SCHEMA],
        "cpu_opcheck_add_rms_norm_quant": [SCHEMA, "_rms_norm_quant_fake"],
        "cuda_backward_op_fp32": ["rms_norm_backward_kernel"],
        "cuda_quant_bf16": CUDA_QUANT,
        "cuda_quant_fp32_tail": CUDA_QUANT,
        "cuda_quant_fp32_ties": CUDA_QUANT,
        "cuda_residual_bf16": [*CUDA_QUANT, SCHEMA],
        "cuda_opcheck_rms_norm_quant": [*CUDA_QUANT, "_rms_norm_quant_fake"],
        "cuda_perf_quant_bf16": CUDA_QUANT,
        "triton_forward_fp16": ["rms_norm_forward_kernel"],
        "triton_autograd_fp32": ["rms_norm_forward_kernel", "rms_norm_backward_kernel"],
        "triton_quant_bf16": TRITON_QUANT,
        "triton_quant_fp32_tail": TRITON_QUANT,
        "triton_residual_fp16": TRITON_QUANT,
        "triton_compiled_block": ["rms_norm_forward_kernel", *TRITON_QUANT],
        "triton_perf_quant_bf16": TRITON_QUANT,
    },
}


def _partly_written(unit, file: str, functions) -> str:
    """`file` of the template with `functions` written (every region, for ""): the region of each
    one's TODO line and those after it, up to the next function's."""
    text, current = [], None
    for piece in regions.pieces(unit.raw(file), file):
        if piece.kind == "solution":
            named = parse("\n".join(todo_lines(file, textwrap.dedent(piece.starter))))
            current = named[0].function if named else current
        written = piece.kind == "solution" and (functions == "" or current in functions)
        text.append(piece.solved if written or piece.kind == "bug" else piece.starter)
    return "".join(text)


def _forward_written(unit, folder: str) -> None:
    """The template with the forward's functions written and a lab's planted bugs fixed: those
    are the lab's to find, and one (day04's 32-bit row offset) crashes the 4 GiB case on a GPU,
    leaving the process's CUDA context unusable for every case after it."""
    unit.write("template", folder)
    written = FORWARD_WRITTEN[unit.name]
    for file in unit.sources:
        if file in written or regions.planted_bugs(unit.raw(file), file):
            with open(f"{folder}/{file}", "w") as handle:
                handle.write(_partly_written(unit, file, written.get(file, ())))


@pytest.mark.parametrize("unit", GATED, ids=lambda u: u.name)
def test_the_table_names_only_functions_the_template_leaves_to_write(unit):
    todos = {todo.where for todo in template_todos(unit)}
    table = unit.tests().FUNCTIONS_RUN
    named = {where for by_path in table.values() for functions in by_path.values() for where in functions}
    assert named - todos == set(), "not a TODO of the template: a misspelt file or function"


@pytest.mark.parametrize("unit", GATED, ids=lambda u: u.name)
def test_every_function_to_write_holds_back_some_case(unit):
    """The build files' TODOs excepted: they hold back the build, and so every case."""
    spec = unit.tests()
    needed = {where for case in spec.CASES for where in functions_needed(spec, case)}
    todos = {todo.where for todo in template_todos(unit) if todo.file not in unit.build_files}
    assert todos - needed == set(), "a TODO no case waits on"


def _names_refused(text: str) -> set[str]:
    """The functions the COURSE_REFUSE_UNFINISHED lines of C++ `text` name."""
    calls = re.findall(r"^\s*COURSE_REFUSE_UNFINISHED\(([^;]*)\);", text, re.MULTILINE)  # a call may wrap
    return {name for arguments in calls for name in re.findall(r'"([^"]*)"', arguments)}


def _names_called(text: str, function: str, first_only: bool) -> set[str]:
    """The strings Python `text` hands to `function` (its first argument alone, or every one)."""
    calls = [node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Call)]
    named = [call.args[:1] if first_only else call.args for call in calls if getattr(call.func, "id", "") == function]
    return {argument.value for arguments in named for argument in arguments if isinstance(argument, ast.Constant)}


@pytest.mark.parametrize("unit", GATED, ids=lambda u: u.name)
def test_every_function_to_write_is_refused_by_an_op_that_runs_it(unit):
    """The ops' own safety net: a C++ or CUDA function left to write is named by some op's
    COURSE_REFUSE_UNFINISHED, a Triton kernel's todo by some op's _refuse_unfinished, and
    neither names anything else: no half-written kernel runs, whatever the runner lets through."""
    compiled = {todo.function for todo in template_todos(unit) if todo.file.endswith((".cpp", ".cu", ".cuh", ".h"))}
    assert set().union(*(_names_refused(unit.solution(file)) for file in unit.sources)) == compiled
    for file in (file for file in unit.sources if file.endswith(".py")):
        kernels = _names_called(unit.template(file), "todo", first_only=True)
        assert kernels == _names_called(unit.solution(file), "_refuse_unfinished", first_only=False), file


@pytest.mark.parametrize("unit", [u for u in GATED if u.name in WAITING], ids=lambda u: u.name)
def test_with_the_forward_written_each_case_waits_on_its_own_functions_alone(unit, tmp_path):
    """CPU and CUDA alike: the mapping a GPU run would follow, checked here without one."""
    _forward_written(unit, str(tmp_path))
    todos = unwritten(str(tmp_path), list(unit.files))
    spec = unit.tests(hidden=False)
    waits = {case.name: [t.function for t in waiting_on(functions_needed(spec, case), todos)] for case in spec.CASES}
    assert {name: functions for name, functions in waits.items() if functions} == WAITING[unit.name]


def test_a_waiting_case_is_reported_with_what_it_needs_and_not_run():
    spec = units.load("day06_bias_gelu").tests(hidden=False)
    todos = parse("TODO(day06): bias_gelu.py, BiasGeluFunction.backward: call _ext.backward(dy, x, bias)")
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        # No module: a case that ran would fail on it, not wait.
        assert not run_cases(spec, None, seed=1, devices=("cpu",), todos=todos)
    lines = output.getvalue().splitlines()
    assert "  TODO  cpu_autograd_tanh_fp32" in lines
    assert "        needs BiasGeluFunction.backward (bias_gelu.py): TODO(day06) still to write" in lines
    assert "  FAIL  cpu_forward_erf_fp32" in lines
    assert lines[-1] == "0/6 public tests passed, 2 wait on functions still to write (seed 1)"


def test_the_grader_fails_a_refused_case_with_the_functions_it_needs():
    spec = units.load("day09_rmsnorm_int8").tests()
    case = next(case for case in spec.CASES if case.name == "cpu_residual_fp32")
    refused = {
        "exception": "RuntimeError: this op is not finished yet:\n"
        "TODO(day09): rmsnorm_ops.cpp, TORCH_LIBRARY(rmsnorm_int8, m): add_rms_norm_quant's schema must say "
        "that it writes residual (Tensor(a!)), then delete this line"
    }
    verdict = judge(spec, case, make_input_sets(spec, case, 1), refused)
    assert not verdict.passed
    assert verdict.message == "needs TORCH_LIBRARY(rmsnorm_int8, m) (rmsnorm_ops.cpp): TODO(day09) still to write"


@pytest.mark.parametrize("unit", [u for u in GATED if u.name in FORWARD_WRITTEN], ids=lambda u: u.name)
def test_with_the_forward_written_its_tests_pass_and_the_others_name_what_they_need(unit, tmp_path):
    """Built as a student's would be: the cases whose functions are written pass (on a GPU,
    the CUDA forward's too, the backward still a stub); the others are reported waiting on
    theirs, and their ops, run all the same, refuse naming the same functions."""
    source = str(tmp_path / "src")
    _forward_written(unit, source)
    module, _ = build_and_load(unit.plan(), source, str(tmp_path / "build"))
    spec = unit.tests(hidden=False)
    devices = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        run_cases(spec, module, seed=2, devices=devices, todos=unwritten(source, list(unit.files)))
    lines = output.getvalue().splitlines()
    for case in (case for case in spec.CASES if case.device in devices):
        waiting = WAITING[unit.name].get(case.name)
        if waiting:
            assert f"  TODO  {case.name}" in lines, output.getvalue()
        else:  # a perf case passes by its speed, which is not this test's
            assert f"  TODO  {case.name}" not in lines, output.getvalue()
            assert case.kind == "perf" or f"  PASS  {case.name}" in lines, output.getvalue()
        if waiting and case.kind != "perf":
            refused = re.findall(r"^needs (.+?) \(", run_case(spec, module, case, seed=2).message, re.MULTILINE)
            assert refused and set(refused) <= set(waiting), (case.name, refused)
