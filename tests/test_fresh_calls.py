"""A values case is called last on new buffers holding new values while the first call's outputs
are kept (Case.called_fresh): an op that hands out one output buffer on every call, or returns
its input, loses it; an honest op does not. day01's op stood in for by Python, no build."""

import types

import pytest
import torch

from autograder.result_schema import result_problem
from course.cases import FRESH_ELEMENTS, Case, make_input_sets
from course.harness import execute
from course.judge import judge
from course.public import run_case
from course.spec import units

SPEC = units.load("day01_relu_bias").tests()
CASES = {case.name: case for case in SPEC.CASES}


def _honest(x, bias):
    return (x + bias).clamp_min(0)


def _kept_buffer():
    """One output tensor per shape, kept and written again on every call."""
    kept = {}

    def relu_bias(x, bias):
        y = kept.setdefault((tuple(x.shape), x.dtype), torch.empty(x.shape, dtype=x.dtype))
        return torch.clamp_min(x + bias, 0, out=y)

    return relu_bias


def _into_input(x, bias):
    return x.add_(bias).clamp_min_(0)


def _ext(relu_bias) -> types.SimpleNamespace:
    return types.SimpleNamespace(relu_bias=relu_bias)


def test_small_values_cases_are_called_fresh_and_others_not():
    assert CASES["cpu_fp64_small"].called_fresh and CASES["cpu_fp64_small"].input_sets == 2
    rotated = CASES["cpu_no_cached_results"]
    assert rotated.called_fresh and rotated.input_sets == 3  # the second call still in the same buffers
    assert CASES["cpu_fp16_small"].input_sets == 3  # drawn three times: the third in new buffers
    assert not CASES["error_bias_shape"].called_fresh
    assert not CASES["cuda_current_stream"].called_fresh  # a side stream's sets have buffers of their own
    big = Case("big", "cpu_values", params=dict(shape=(FRESH_ELEMENTS + 1, 1)))
    assert not big.called_fresh and big.input_sets == 1


@pytest.mark.parametrize("name", ["cpu_fp64_small", "cpu_no_cached_results", "cpu_fp16_small"])
def test_an_honest_op_passes(name):
    verdict = run_case(SPEC, _ext(_honest), CASES[name], seed=3)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("name", ["cpu_fp64_small", "cpu_fp32_tail", "cpu_no_cached_results", "cpu_fp16_small"])
def test_an_op_that_keeps_its_output_buffer_loses(name):
    verdict = run_case(SPEC, _ext(_kept_buffer()), CASES[name], seed=3)
    assert not verdict.passed
    assert "shares memory with an output of the first call" in verdict.message


def test_an_op_that_returns_its_input_loses():
    verdict = run_case(SPEC, _ext(_into_input), CASES["cpu_fp32_tail"], seed=3)
    assert not verdict.passed
    assert "y shares memory with an input" in verdict.message


def test_first_outputs_written_again_lose_though_memory_looks_apart():
    """The judge reads the first call's outputs as they were after the last call: a forged
    memory map does not hide a buffer written again."""
    case = CASES["cpu_fp32_tail"]
    input_sets = make_input_sets(SPEC, case, seed=3)
    result = execute(SPEC, _ext(_kept_buffer()), case, input_sets)
    result["memory"] = {key: [[0, 0]] * len(spans) for key, spans in result["memory"].items()}
    assert result_problem(SPEC, case, input_sets, result) == ""
    verdict = judge(SPEC, case, input_sets, result)
    assert not verdict.passed and "y of the first call changed when the op was called again" in verdict.message


@pytest.mark.parametrize("part", ["first_after", "memory"])
def test_a_result_without_the_fresh_calls_data_is_malformed(part):
    case = CASES["cpu_fp32_tail"]
    input_sets = make_input_sets(SPEC, case, seed=3)
    result = execute(SPEC, _ext(_honest), case, input_sets)
    assert result_problem(SPEC, case, input_sets, result) == ""
    del result[part]
    assert result_problem(SPEC, case, input_sets, result)
