"""What the grader's own process checks before it believes anything from a submission: the
submission's container, a child's result, a failed build's log. No build, no child process."""

import json
import os
import signal
import types
import zipfile

import nbformat
import pytest
import torch
from helpers import with_fresh_call_data

from autograder.build_log import student_errors
from autograder.result_schema import result_problem
from autograder.runner import load_result
from autograder.submission import (
    MAX_FOLDER_DEPTH,
    MAX_FOLDER_ENTRIES,
    MAX_SOURCE_BYTES,
    MAX_ZIP_MEMBERS,
    SubmissionError,
    read_submission,
)
from autograder.untrusted_files import is_regular_file
from course.cases import make_input_sets, standard_normal
from course.judge import judge
from course.ops import jacobian_probe
from course.spec import units

UNIT = units.load("day01_relu_bias")
SPEC = UNIT.tests()
CASES = {case.name: case for case in SPEC.CASES}


def _honest(case_name: str) -> tuple:
    """(case, input sets, a well-formed result for them)."""
    case = CASES[case_name]
    input_sets = make_input_sets(SPEC, case, seed=1)
    if case.kind == "error":
        return case, input_sets, {"error": ("RuntimeError", "bias must have N elements")}
    outputs = [tuple(SPEC.OPS["forward"].reference(inputs)) for inputs in input_sets]
    result = {"outputs": [tuple(t.to(inputs["x"].dtype) for t in out) for out, inputs in zip(outputs, input_sets)]}
    result["output_devices"] = [(case.device,) for _ in input_sets]
    result["inputs_after"] = {k: v for k, v in input_sets[-1].items() if isinstance(v, torch.Tensor)}
    result["ops"], result["ops_seen"], result["kernels"] = ["aten::empty"], ["aten::empty"], []
    return case, input_sets, with_fresh_call_data(case, result)


@pytest.mark.parametrize(
    "case_name, forge, problem",
    [
        ("cpu_fp64_small", lambda r: {**r, "outputs": []}, "0 set(s) of outputs for 2"),
        ("cpu_fp64_small", lambda r: {**r, "outputs": [("a str",), *r["outputs"][1:]]}, "y is a str, not a tensor"),
        ("cpu_fp64_small", lambda r: {**r, "outputs": "not a list"}, "outputs is not a list"),
        (
            "cpu_fp64_small",
            lambda r: {**r, "outputs": [(*o, "a str") for o in r["outputs"]], "output_devices": [("cpu",) * 2] * 2},
            "output 2 is a str, not a tensor",
        ),
        ("cpu_fp64_small", lambda r: {k: v for k, v in r.items() if k != "inputs_after"}, "inputs after the call"),
        (
            "cpu_fp64_small",
            lambda r: {**r, "outputs": [(r["outputs"][0][0].to_sparse(),), *r["outputs"][1:]]},
            "not a plain tensor",
        ),
        ("cpu_fp64_small", lambda r: {k: v for k, v in r.items() if k != "output_devices"}, "devices of the outputs"),
        ("cpu_fp64_small", lambda r: {**r, "output_devices": [(), ("cpu",)]}, "devices of output set 0"),
        ("cpu_fp64_small", lambda r: {**r, "output_devices": [(0,), ("cpu",)]}, "devices of output set 0"),
        ("cpu_own_code", lambda r: {k: v for k, v in r.items() if k != "ops"}, "profiled ops"),
        ("cpu_own_code", lambda r: {**r, "ops": [1, 2]}, "profiled ops"),
        ("cpu_own_code", lambda r: {k: v for k, v in r.items() if k != "ops_seen"}, "dispatch mode saw"),
        ("error_bias_shape", lambda r: {"error": "RuntimeError"}, "neither None nor"),
        ("cpu_fp64_small", lambda r: ["a", "list"], "not a dict"),
        ("cpu_fp64_small", lambda r: {"exception": 42}, "not text"),
    ],
)
def test_a_malformed_result_is_named(case_name, forge, problem):
    case, input_sets, result = _honest(case_name)
    assert result_problem(SPEC, case, input_sets, result) == ""
    assert problem in result_problem(SPEC, case, input_sets, forge(result))


def _counted(result: dict, change) -> dict:
    """`result` with every output set, and the first call's outputs after the last, changed."""
    forged = {**result, "outputs": [change(o) for o in result["outputs"]]}
    forged["output_devices"] = [("cpu",) * len(o) for o in forged["outputs"]]
    return forged


@pytest.mark.parametrize(
    "forge, count",
    [
        (lambda r: _counted(r, lambda o: (*o, o[0])), 2),  # first_after keeps the op's count
        (lambda r: {**_counted(r, lambda o: (*o, o[0])), "first_after": (*r["first_after"], r["first_after"][0])}, 2),
        (lambda r: {**_counted(r, lambda o: ()), "first_after": ()}, 0),
        (lambda r: _counted(r, lambda o: (*o, o[0]) if o is r["outputs"][0] else o), 2),
    ],
    ids=["extra_output", "extra_output_kept_after", "no_output", "extra_in_the_first_set"],
)
def test_the_count_of_outputs_is_the_op_contracts(forge, count):
    """A result whose calls return more or fewer outputs than the op names fails on that count,
    whatever the child says of its outputs elsewhere, never as a result the grader could not
    read or judge."""
    from autograder.stages.judge import verdict as judged

    case, input_sets, result = _honest("cpu_fp64_small")
    assert case.called_fresh and judged(SPEC, case, input_sets, result, None, frozenset()).passed
    verdict = judged(SPEC, case, input_sets, forge(result), None, frozenset())
    assert not verdict.passed and f"returned {count} outputs, expected 1 (y)" in verdict.message, verdict.message


def _perf_result() -> tuple:
    """(a perf case, its input sets, a well-formed result: every set's right output)."""
    from course.cases import Case

    case = Case("p", "g", kind="perf", params=dict(shape=(4, 8), full_at=0.9, zero_at=0.45))
    input_sets = make_input_sets(SPEC, case, seed=1)
    outputs = [(SPEC.OPS["forward"].reference(inputs)[0].float(),) for inputs in input_sets]
    return (
        case,
        input_sets,
        {
            "timing": {"median_ms": 1.0, "spread": 0.1, "reps": 10},
            "outputs": outputs,
            "output_devices": [("cpu",)] * len(outputs),
        },
    )


def test_a_perf_result_needs_a_timing_that_is_a_number_and_every_sets_outputs():
    case, input_sets, good = _perf_result()
    assert len(input_sets) == 3 and result_problem(SPEC, case, input_sets, good) == ""
    for bad in (float("nan"), "fast", None, True, 10**400):  # an int past float's range: no OverflowError
        forged = {**good, "timing": {**good["timing"], "median_ms": bad}}
        assert "median_ms is not a number" in result_problem(SPEC, case, input_sets, forged)
    first_only = {**good, "outputs": good["outputs"][:1], "output_devices": good["output_devices"][:1]}
    assert "1 set(s) of outputs for 3" in result_problem(SPEC, case, input_sets, first_only)


def test_a_reference_that_raised_on_a_perf_case_leaves_it_not_run():
    """The grader's side failing (the reference out of memory, say) is not the student's fault:
    the case is reported as not run, with the reference's error, not as a malformed result."""
    from autograder.stages.judge import verdict as judged

    case, input_sets, good = _perf_result()
    baseline = {"exception": "RuntimeError: CUDA out of memory"}
    verdict = judged(SPEC, case, input_sets, good, baseline, frozenset())
    assert not verdict.passed
    assert verdict.message.startswith("not run: the reference could not be timed here"), verdict.message
    assert "CUDA out of memory" in verdict.message


def test_a_result_that_breaks_a_check_fails_its_case_only(monkeypatch):
    """Whatever a forged result does to the checks themselves, it costs that case a failed
    verdict: the grading goes on and writes its report."""
    from autograder.stages import judge as judge_stage

    def broken(*args):
        raise OverflowError("a check met a value it did not foresee")

    monkeypatch.setattr(judge_stage, "result_problem", broken)
    case, input_sets, good = _perf_result()
    verdict = judge_stage.verdict(SPEC, case, input_sets, good, None, frozenset())
    assert not verdict.passed and "could not judge this result (OverflowError" in verdict.message


def test_a_perf_case_checks_the_timed_output_of_every_input_set():
    """An op that answers every call of a shape with its first answer is right on one set only."""
    case, input_sets, good = _perf_result()
    spec = types.SimpleNamespace(**vars(SPEC), bytes_moved=lambda inputs: 64)  # day01 has no perf case
    baseline = {"timing": good["timing"], "reference_timing": good["timing"]}
    assert judge(spec, case, input_sets, good, baseline).passed
    stale = {**good, "outputs": [good["outputs"][0]] * 3}
    verdict = judge(spec, case, input_sets, stale, baseline)
    assert not verdict.passed and verdict.fraction == 0
    assert verdict.message.startswith("the output of the timed calls on input set 2 of 3 was wrong")


def test_outputs_must_come_back_on_the_inputs_device():
    """Right values computed on the CPU for CUDA inputs fail; a count or verdict an op makes on the
    CPU by design (Op.host_outputs) does not."""
    case = CASES["cuda_fp32_small"]
    input_sets = make_input_sets(SPEC, case, seed=1)
    outputs = [tuple(t.float() for t in SPEC.OPS["forward"].reference(inputs)) for inputs in input_sets]
    on_gpu, on_cpu = [("cuda:0",)] * len(outputs), [("cpu",)] * len(outputs)
    assert judge(SPEC, case, input_sets, {"outputs": outputs, "output_devices": on_gpu}).passed
    verdict = judge(SPEC, case, input_sets, {"outputs": outputs, "output_devices": on_cpu})
    assert not verdict.passed and "y came back on cpu, but the inputs are on cuda" in verdict.message
    gradcheck = CASES["cuda_gradcheck_fp64"]
    inputs = make_input_sets(SPEC, gradcheck, seed=1)[0]
    raw = jacobian_probe(lambda x, bias: _ReluBias.apply(x, bias, 1.0), inputs, ("x", "bias"))
    assert judge(SPEC, gradcheck, [inputs], {"outputs": [raw], "output_devices": [("cpu", "cpu")]}).passed


class _ReluBias(torch.autograd.Function):
    """relu(x + bias) with a backward that scales grad_x by `factor` (1: right)."""

    @staticmethod
    def forward(ctx, x, bias, factor):
        y = torch.relu(x + bias)
        ctx.save_for_backward(y)
        ctx.factor = factor
        return y

    @staticmethod
    def backward(ctx, grad_y):
        (y,) = ctx.saved_tensors
        grad_x = grad_y * (y > 0) * ctx.factor
        return grad_x, (grad_y * (y > 0)).sum(0), None


def _gradcheck_verdict(factor: float = 1.0, forge=None):
    """The judge's verdict on a gradcheck case, from jacobian_probe run here as a child would."""
    case = CASES["cpu_gradcheck_fp64"]
    inputs = make_input_sets(SPEC, case, seed=1)[0]  # the first set: one call's raw data
    raw = jacobian_probe(lambda x, bias: _ReluBias.apply(x, bias, factor), inputs, ("x", "bias"))
    raw = forge(raw) if forge else raw
    result = {"outputs": [raw], "output_devices": [("cpu",) * len(raw)]}
    assert result_problem(SPEC, case, [inputs], result) == ""
    return judge(SPEC, case, [inputs], result)


def test_gradcheck_is_judged_from_the_raw_jacobians():
    assert _gradcheck_verdict().passed
    wrong = _gradcheck_verdict(factor=1.01)  # past gradcheck's rtol of 1e-3
    assert not wrong.passed and "jacobian from backward" in wrong.message
    assert "worst at index" in wrong.message


@pytest.mark.parametrize(
    "forge, problem",
    [
        (
            lambda raw: (torch.zeros(2, 0, 0, dtype=torch.float64), torch.zeros(0, 0, dtype=torch.float64)),
            "shape [0, 0]",
        ),
        (lambda raw: (raw[0], raw[1][:, :-1]), "shape"),
        (lambda raw: (raw[0][:1], raw[1]), "shape [1,"),
        (lambda raw: (raw[0].float(), raw[1]), "dtype torch.float32"),
        (lambda raw: (raw[0],), "returned 1 outputs, expected 2"),
    ],
)
def test_gradcheck_data_of_the_wrong_shape_fails(forge, problem):
    verdict = _gradcheck_verdict(forge=forge)
    assert not verdict.passed and problem in verdict.message, verdict.message


LOG = """FAILED: relu_bias.o
c++ -MMD -I/secret/include -c ../src/relu_bias.cpp -o relu_bias.o
In file included from ../src/relu_bias.cpp:2:
/etc/passwd:1:5: error: found ':' in nested-name-specifier, expected '::'
    1 | root:x:0:0:root:/root:/bin/bash
      |     ^
../src/relu_bias.cpp:9:12: error: 'nope' was not declared in this scope
    9 |   return nope;
      |          ^~~~
/etc/shadow(3): error: expected a ";"
  root:$6$salt$hash:19000:0:99999:7:::
  ^
ninja: build stopped: subcommand failed.
"""


def test_compiler_output_shows_only_the_students_files(tmp_path):
    source, build = tmp_path / "src", tmp_path / "build"
    source.mkdir()
    build.mkdir()
    shown = student_errors(LOG, str(source), str(build), public=[])
    assert "root:" not in shown and "salt" not in shown and "/secret" not in shown
    assert "relu_bias.cpp:9:12: error: 'nope' was not declared" in shown and "return nope;" in shown
    assert shown.count("not one of your files") == 2
    assert len(student_errors(LOG * 500, str(source), str(build), public=[], limit=1000)) <= 3000


def _notebook(answer: str, padding: int = 0):
    notebook = nbformat.read(os.path.join(UNIT.repo, "notebooks", "instructor", f"{UNIT.name}.ipynb"), as_version=4)
    next(c for c in notebook.cells if c.metadata.get("course", {}).get("answer")).source = answer
    if padding:  # a plot's worth of output
        next(c for c in notebook.cells if c.cell_type == "code").outputs = [
            nbformat.v4.new_output("stream", text="x" * padding)
        ]
    return notebook


def test_answers_in_a_notebook_over_a_megabyte_are_kept(tmp_path):
    archive = tmp_path / "submission.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr(f"{UNIT.name}.ipynb", nbformat.writes(_notebook("because", padding=2 * MAX_SOURCE_BYTES)))
    _, answers = read_submission(str(archive), UNIT)
    assert any("because" in answer for answer in answers.values())


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": {"0": {}}}),  # cells not a list
        json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": 3}]}),
        "{ not json",
    ],
)
def test_a_broken_notebook_is_a_clear_error(tmp_path, text):
    path = tmp_path / "submission.ipynb"
    path.write_text(text)
    with pytest.raises(SubmissionError, match="not a valid notebook"):
        read_submission(str(path), UNIT)


def test_a_damaged_zip_is_a_clear_error(tmp_path):
    archive = tmp_path / "submission.zip"
    with zipfile.ZipFile(archive, "w") as handle:  # stored, not compressed: the text is in the file
        handle.writestr("relu_bias.cu", "int kernel_source_here;" * 100)
    data = archive.read_bytes()
    archive.write_bytes(data.replace(b"kernel_source_here", b"kernel_source_HERE", 1))  # its checksum no longer holds
    with pytest.raises(SubmissionError, match="the zip could not be read"):
        read_submission(str(archive), UNIT)


def test_a_zip_of_too_many_files_is_refused(tmp_path):
    archive = tmp_path / "submission.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for index in range(MAX_ZIP_MEMBERS + 1):
            handle.writestr(f"junk/{index}.txt", "")
    with pytest.raises(SubmissionError, match=f"at most {MAX_ZIP_MEMBERS}"):
        read_submission(str(archive), UNIT)


def test_a_link_in_a_folder_submission_is_not_followed(tmp_path):
    UNIT.write("solution", str(tmp_path))
    (tmp_path / "relu_bias.cu").unlink()
    (tmp_path / "relu_bias.cu").symlink_to("/etc/passwd")
    files, _ = read_submission(str(tmp_path), UNIT)
    assert "relu_bias.cu" not in files and "relu_bias.cpp" in files


@pytest.fixture
def never_blocks():
    """A read that waits on a named pipe fails the test instead of hanging it."""

    def _hung(*_):
        raise TimeoutError("the read blocked")

    previous = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_named_pipe_in_or_as_a_submission_is_not_waited_on(tmp_path, never_blocks):
    folder = tmp_path / "folder"
    UNIT.write("solution", str(folder))
    (folder / "relu_bias.cu").unlink()
    os.mkfifo(folder / "relu_bias.cu")
    files, _ = read_submission(str(folder), UNIT)
    assert "relu_bias.cu" not in files and "relu_bias.cpp" in files
    os.mkfifo(tmp_path / "submission.ipynb")
    with pytest.raises(SubmissionError, match="not a regular file"):
        read_submission(str(tmp_path / "submission.ipynb"), UNIT)


def test_a_folder_tree_too_deep_or_too_large_is_refused(tmp_path):
    """os.walk recurses: folders nested 1500 deep made it raise RecursionError, past the
    grader's handling, and no report was written."""
    deep = tmp_path / "deep"
    UNIT.write("solution", str(deep))
    nested = deep
    for _ in range(MAX_FOLDER_DEPTH + 1):
        nested = nested / "d"
    nested.mkdir(parents=True)
    with pytest.raises(SubmissionError, match=f"over {MAX_FOLDER_DEPTH} deep"):
        read_submission(str(deep), UNIT)
    wide = tmp_path / "wide"
    UNIT.write("solution", str(wide))
    for index in range(MAX_FOLDER_ENTRIES + 1):
        (wide / f"{index}.txt").touch()
    with pytest.raises(SubmissionError, match=f"over {MAX_FOLDER_ENTRIES} files"):
        read_submission(str(wide), UNIT)


def test_a_build_failing_outside_the_students_files_is_explained_and_its_log_kept(tmp_path):
    from autograder import report
    from autograder.build_log import BUILD_LOG
    from autograder.results import Grade, TestResult

    log = "ccache: cannot write its cache: Permission denied\nninja: build stopped: subcommand failed."
    assert student_errors(log, str(tmp_path / "src"), str(tmp_path / "build"), []) == ""
    build = TestResult("build", 1.0, False, "build failed", visibility="visible", log=log)
    report.write(Grade(UNIT.name, tests=[build]), str(tmp_path))
    assert (tmp_path / BUILD_LOG).read_text() == log
    assert "Permission denied" not in (tmp_path / "results.json").read_text()
    report.write(Grade(UNIT.name, tests=[TestResult("build", 1.0, True, "compiled")]), str(tmp_path))
    assert not (tmp_path / BUILD_LOG).exists(), "a later grading whose build passed keeps no stale log"


def test_a_small_16_bit_case_is_judged_on_every_draw():
    case = CASES["cpu_fp16_small"]
    input_sets = make_input_sets(SPEC, case, seed=1)
    assert len(input_sets) == 3 and not torch.equal(input_sets[0]["x"], input_sets[1]["x"])
    outputs = [tuple(t.to(torch.float16) for t in SPEC.OPS["forward"].reference(inputs)) for inputs in input_sets]
    after = {k: v for k, v in input_sets[-1].items() if isinstance(v, torch.Tensor)}
    devices = [("cpu",)] * 3
    assert judge(SPEC, case, input_sets, {"outputs": outputs, "output_devices": devices, "inputs_after": after}).passed
    stale = outputs[:1] * 2 + outputs[2:]  # the second draw answered with the first's y
    verdict = judge(SPEC, case, input_sets, {"outputs": stale, "output_devices": devices, "inputs_after": after})
    assert not verdict.passed and verdict.message.startswith("on input draw 2 of 3 (new values in the same buffers)")
    stale = outputs[:2] + [outputs[1]]  # the third, in new buffers, answered with the second's y
    verdict = judge(SPEC, case, input_sets, {"outputs": stale, "output_devices": devices, "inputs_after": after})
    assert not verdict.passed and verdict.message.startswith("on call 3 of 3, with new values in new buffers")


def test_a_16_bit_case_sized_without_a_shape_is_drawn_once():
    """day04's overflow cases build a tensor past 2^31 elements: three of them would be waste."""
    overflow = next(c for c in units.load("day04_layernorm_edge_cases").tests().CASES if c.name == "cuda_fwd_overflow")
    assert overflow.elements is None and overflow.input_sets == 1


def test_a_result_file_that_is_a_pipe_or_a_link_is_refused_without_waiting(tmp_path):
    regular, fifo, link = tmp_path / "0.result.pt", tmp_path / "1.result.pt", tmp_path / "2.result.pt"
    torch.save({"exception": "\ud800" * 10_000}, regular)
    os.mkfifo(fifo)  # no writer: a blocking open would wait for ever
    link.symlink_to(regular)
    assert is_regular_file(str(regular)) and not is_regular_file(str(fifo)) and not is_regular_file(str(link))
    assert "could not be read" in load_result(str(fifo)) and "could not be read" in load_result(str(link))
    message = load_result(str(regular))["exception"]
    assert len(message) < 5000 and "\ud800" not in message  # cut short, and encodable


_OWN_FORWARD = "void layernorm_forward_warp<float>(float const*, float const*, float*, long, long)"


def _checked_at_timed_size(
    timed_ms: float = 0.06,
    busy_ms=0.05,
    ops=("aten::empty",),
    kernels=(_OWN_FORWARD,),
    wrong_when_profiled: bool = False,
    outcome: dict | None = None,
) -> tuple:
    """A day05 perf verdict that earned points, and its check at the timed size: the timed calls
    took `timed_ms`; the profiled call ran `ops` and `kernels`, kept the GPU busy for `busy_ms`,
    and answered right unless `wrong_when_profiled`. `outcome` replaces the whole outcome."""
    from autograder.timed_kernels import own_code_at_timed_size
    from course.judge import Verdict

    spec = units.load("day05_layernorm_performance").tests()
    case = next(c for c in spec.CASES if c.name == "cuda_perf_fp32_d7")
    inputs = make_input_sets(spec, case, seed=1)[:1]
    outputs = tuple(
        t.to(dtype) for t, dtype in zip(spec.OPS["forward"].reference(inputs[0]), spec.OPS["forward"].dtypes(inputs[0]))
    )
    profiled_outputs = tuple(t + 1 for t in outputs) if wrong_when_profiled else outputs
    earned = Verdict(True, "1.00x the reference", 1.0, {"ratio": 1.0})
    profiled = {
        "outputs": [outputs, profiled_outputs],
        "output_devices": [("cuda:0",) * 3] * 2,
        "ops": list(ops),
        "kernels": list(kernels),
        "busy_ms": busy_ms,
    }
    if outcome is None:
        outcome = {"timing": {"median_ms": timed_ms, "spread": 0.01, "reps": 50}, "own_kernel": profiled}
    return earned, own_code_at_timed_size(spec, case, inputs, outcome, earned, frozenset({"layernorm_forward_warp"}))


def test_a_timed_op_needs_a_kernel_of_its_own_at_the_size_it_was_timed_at():
    """An op that hands the perf-sized inputs to PyTorch loses the perf points it earned;
    PyTorch's kernels helping its own (a reduction of partial sums) do not."""
    from autograder.timed_kernels import profiled_case

    spec = units.load("day05_layernorm_performance").tests()
    perf = next(c for c in spec.CASES if c.name == "cuda_perf_fp32_d7")
    assert profiled_case(perf).checks == ("own_kernel",) and profiled_case(spec.CASES[0]) is None
    torchs = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(at::native::ReduceOp<float>)"
    earned, kept = _checked_at_timed_size(kernels=[_OWN_FORWARD, torchs])
    assert (kept.passed, kept.message, kept.fraction) == (True, earned.message, 1.0)
    assert kept.measurements == {"ratio": 1.0, "kernels_busy_ms": 0.05}  # for the report
    _, handed_over = _checked_at_timed_size(ops=["aten::native_layer_norm"], kernels=[torchs])
    assert not handed_over.passed and handed_over.fraction == 0
    assert "aten::native_layer_norm" in handed_over.message and "did not run code of its own" in handed_over.message
    assert not _checked_at_timed_size(kernels=[torchs])[1].passed
    # Its own kernel while profiled, but a wrong answer there: the profiled call's outputs are judged too.
    _, wrong_when_profiled = _checked_at_timed_size(wrong_when_profiled=True)
    assert not wrong_when_profiled.passed and "with the right answer" in wrong_when_profiled.message
    assert "y: 7340032 of 7340032 elements differ" in wrong_when_profiled.message
    _, missing = _checked_at_timed_size(outcome={})
    assert not missing.passed and "no profiled call" in missing.message


def test_timed_calls_faster_than_the_kernels_profiled_earn_nothing():
    """c01 of docs/security.md: an op that runs its own kernel under the profiler and PyTorch's
    faster op when timed. An honest op's timed calls (cold L2) take at least its kernels' time."""
    for timed, busy in ((1.0, 1.0), (0.8, 1.0), (0.2, 0.0), (5.0, 1.0)):
        earned, checked = _checked_at_timed_size(timed, busy)
        assert (checked.passed, checked.fraction, checked.message) == (True, 1.0, earned.message), (timed, busy)
    earned, caught = _checked_at_timed_size(0.2, 1.0)
    assert not caught.passed and caught.fraction == 0 and caught.measurements == {"ratio": 1.0, "kernels_busy_ms": 1.0}
    assert caught.message.startswith(earned.message)
    assert (
        "its timed calls ran faster than the kernels it runs when profiled: 0.200 ms timed against "
        "1.000 ms of its kernels under the profiler"
    ) in caught.message


@pytest.mark.parametrize("busy", [None, "1.0", True, -0.5, float("nan"), float("inf"), [1.0]])
def test_a_malformed_busy_time_is_a_malformed_result(busy):
    _, checked = _checked_at_timed_size(0.2, busy)
    assert not checked.passed and checked.fraction == 0
    assert "malformed result" in checked.message and "busy time" in checked.message


def test_a_missing_busy_time_is_a_malformed_result():
    from autograder.result_schema import profiled_run_problem
    from autograder.timed_kernels import judged_sets, profiled_case

    spec = units.load("day05_layernorm_performance").tests()
    case = profiled_case(next(c for c in spec.CASES if c.name == "cuda_perf_fp32_d7"))
    inputs = make_input_sets(spec, case, seed=1)[:1]
    outputs = tuple(
        t.to(dtype) for t, dtype in zip(spec.OPS["forward"].reference(inputs[0]), spec.OPS["forward"].dtypes(inputs[0]))
    )
    run = {"outputs": [outputs] * 2, "output_devices": [("cuda:0",) * 3] * 2, "ops": [], "kernels": []}
    assert "busy time" in profiled_run_problem(spec, case, judged_sets(inputs), run)
    assert profiled_run_problem(spec, case, judged_sets(inputs), {**run, "busy_ms": 0}) == ""
    assert "profiled kernels" in profiled_run_problem(
        spec, case, judged_sets(inputs), {**run, "kernels": None, "busy_ms": 0}
    )


def _event(start, end, device="cuda", activity="kernel", annotation=False):
    """A profiler event as prof.events() lists it; activity None: a profiler without activity_type."""
    kind = torch.autograd.DeviceType.CUDA if device == "cuda" else torch.autograd.DeviceType.CPU
    return types.SimpleNamespace(
        time_range=types.SimpleNamespace(start=start, end=end),
        device_type=kind,
        activity_type=activity,
        is_user_annotation=annotation,
    )


def test_busy_time_is_the_union_of_the_kernels_intervals():
    """Kernels on several streams overlap: each moment the GPU was busy counts once."""
    from course.harness import _is_gpu_work, covered

    assert covered([]) == 0
    assert covered([(0, 10), (20, 25)]) == 15  # disjoint
    assert covered([(0, 10), (5, 15)]) == 15  # overlapping
    assert covered([(0, 100), (10, 20), (30, 40)]) == 100  # nested
    assert covered([(5, 15), (0, 10), (10, 12)]) == 15  # unsorted, touching
    assert covered([(3, 3), (7, 4)]) == 0  # empty and backwards spans add nothing
    events = [
        _event(0, 400),
        _event(200, 600, activity="gpu_memcpy"),
        _event(1000, 1100, activity="gpu_memset"),
        _event(0, 5000, device="cpu", activity="cpu_op"),  # the host's time is not the GPU's
        _event(0, 5000, activity="gpu_user_annotation"),  # a range's span, its gaps included
        _event(2000, 2300, activity=None),  # an older profiler's kernel
        _event(0, 5000, activity=None, annotation=True),
    ]  # and its user annotation
    assert covered([(e.time_range.start, e.time_range.end) for e in events if _is_gpu_work(e)]) == pytest.approx(1000)


def test_the_profiled_call_at_the_timed_size_runs_as_the_timer_runs_it():
    """Through the child's own function, on the CPU (a day05 perf case made small and moved
    there): the result the parent checks, new memory filled with NaN for the call whose
    outputs are judged and not for the profiled one (the timed calls have none)."""
    import dataclasses

    import course.harness
    from autograder.result_schema import profiled_run_problem
    from autograder.timed_kernels import judged_sets, profiled_case, profiled_run

    spec = units.load("day05_layernorm_performance").tests()
    perf = next(c for c in spec.CASES if c.name == "cuda_perf_fp32_d7")
    case = dataclasses.replace(profiled_case(perf), device="cpu", params={**perf.params, "shape": (8, 32)})
    inputs = make_input_sets(spec, case, seed=1)[0]
    filled = []

    def forward(x, gamma, beta, eps, kernel):
        filled.append(torch.are_deterministic_algorithms_enabled())
        y, mean, rstd = torch.native_layer_norm(x, (x.shape[-1],), gamma, beta, eps)
        return y, mean.view(-1), rstd.view(-1)

    run = profiled_run(spec, types.SimpleNamespace(_ext=types.SimpleNamespace(forward=forward)), case, inputs)
    assert profiled_run_problem(spec, case, judged_sets([inputs]), run) == ""
    assert "aten::native_layer_norm" in run["ops"] and run["kernels"] == [] and run["busy_ms"] == 0.0
    assert filled == [True, False] and course.harness._fill_new_memory


def test_input_sets_made_side_by_side_are_each_cases_own():
    """The grader makes a group's input sets in threads; each case still gets the sets of its
    own name and the run's seed, as course.cases.make_input_sets makes them alone."""
    from autograder.stages.run import input_sets_of

    spec = units.load("day02_layernorm_forward").tests(hidden=True)
    ready = list(enumerate(spec.CASES))
    made = input_sets_of(spec, ready, seed=3)
    assert sorted(made) == [index for index, _ in ready]
    for index, case in ready:
        alone = make_input_sets(spec, case, 3)
        assert len(made[index]) == len(alone) and all(
            got.keys() == want.keys()
            and all(
                torch.equal(got[key], want[key]) if isinstance(want[key], torch.Tensor) else got[key] == want[key]
                for key in want
            )
            for got, want in zip(made[index], alone)
        ), case.name


def test_inputs_are_drawn_in_float32_unless_float64():
    """Random inputs come from float32 draws, rounded once to their dtype; a float64 input is
    still drawn in float64."""

    def seeded():
        return torch.Generator().manual_seed(5)

    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        drawn = standard_normal((3, 4), seeded(), dtype)
        assert drawn.dtype == torch.float32 and torch.equal(drawn, torch.randn(3, 4, generator=seeded()))
    drawn = standard_normal(7, seeded(), torch.float64)
    assert torch.equal(drawn, torch.randn(7, generator=seeded(), dtype=torch.float64))


def test_a_file_check_is_the_graders_own_whatever_the_child_says(tmp_path):
    """day07's CI workflow is judged on the grader's copy of the file, read before the build:
    a child that reports the check passed cannot pass a workflow still holding its TODOs, and a
    child that crashed costs a sound workflow nothing."""
    from autograder.parent_checks import file_problems
    from autograder.stages.judge import GraderFindings
    from autograder.stages.judge import verdict as judged

    unit = units.load("day07_layernorm_package")
    spec = unit.tests()
    case = next(case for case in spec.CASES if case.name == "cpu_ci_workflow")
    input_sets = make_input_sets(spec, case, seed=1)
    unit.write("solution", str(tmp_path / "solved"))
    unit.write("template", str(tmp_path / "starter"))
    solved, starter = file_problems(unit, str(tmp_path / "solved")), file_problems(unit, str(tmp_path / "starter"))
    assert solved == {"ci_workflow": ""}, solved
    assert "still holds its TODOs" in starter["ci_workflow"], starter

    claimed = {"outputs": [(torch.tensor(True),)], "output_devices": [("cpu",)]}
    lost = judged(spec, case, input_sets, claimed, None, frozenset(), grader=GraderFindings(problems=starter))
    assert not lost.passed and "ci.yml: the workflow still holds its TODOs" in lost.message, lost.message
    kept = judged(
        spec, case, input_sets, "the test process crashed", None, frozenset(), grader=GraderFindings(problems=solved)
    )
    assert kept.passed, kept.message
    unread = judged(spec, case, input_sets, claimed, None, frozenset())
    assert not unread.passed and "not run: the grader did not make this check" in unread.message


def test_the_grader_runs_day07s_new_pythons_itself_and_judges_what_they_print(tmp_path):
    """The fresh-import checks run in a Python the grader starts in its sandbox: a package whose
    version check is sound passes, one that goes ahead under another torch, or prints a verdict
    of its own in place of one, fails; nothing of the test process is involved."""
    from autograder.grade_options import GradeOptions
    from autograder.parent_checks import new_python_problems
    from autograder.stages.grading import open_grading
    from course.build import Built

    unit = units.load("day07_layernorm_package")
    build_folder = tmp_path / "work" / "build"

    def package(body: str) -> Built:
        prefix = build_folder / "site"
        (prefix / "fast_layernorm").mkdir(parents=True, exist_ok=True)
        (prefix / "fast_layernorm" / "__init__.py").write_text(body)
        return Built(prefix=str(prefix))

    version_check = (
        "import torch\nbuilt = '" + torch.__version__ + "'\n"
        "if torch.__version__.split('.')[:2] != built.split('.')[:2]:\n"
        "    raise ImportError(f'built against torch {built}, running {torch.__version__}: rebuild it')\n"
    )
    forged = 'import json, os\nprint(json.dumps({"raised": ""}), flush=True)\nos._exit(0)\n'
    planned = {"fresh_import", "other_torch"}
    with open_grading(unit, GradeOptions(work=str(tmp_path / "work"), has_gpu=False, seed=1)) as grading:
        build_folder.mkdir(parents=True)
        grading.sandbox.give(str(build_folder))
        sound = new_python_problems(unit, package(version_check), str(build_folder), grading, planned)
        careless = new_python_problems(unit, package("x = 1\n"), str(build_folder), grading, planned)
        lying = new_python_problems(unit, package(forged), str(build_folder), grading, {"other_torch"})
    assert sound == {"fresh_import": "", "other_torch": ""}, sound
    assert careless["fresh_import"] == "" and "went ahead" in careless["other_torch"], careless
    assert "went ahead" in lying["other_torch"], lying
