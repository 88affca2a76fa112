"""Each unit's tolerances are calibrated: the exact answer passes, while zeros, the
input handed back, or the answer computed in a lower precision fail."""

import pytest
import torch
from helpers import load_spec

from course.cases import INPUTS_UNCHANGED, make_input_sets
from course.judge import all_within, describe_mismatch, judge, wrong_elements
from course.ops import op_for
from course.spec import units

SPECS = {u.name: load_spec(u.name) for u in units.all_units() if u.has_tests()}


def _value_cases():
    for name, spec in SPECS.items():
        for case in spec.CASES:
            # The judge runs on the CPU whatever device the op ran on: GPU cases are checked here
            # too, those of up to 2^20 elements (the large ones repeat small ones' arithmetic).
            if (
                case.kind == "values"
                and set(case.checks) <= {INPUTS_UNCHANGED}
                and (case.device == "cpu" or (case.elements is not None and case.elements <= 1 << 20))
            ):
                yield pytest.param(spec, case, id=f"{name}:{case.name}")


def _judge_outputs(spec, case, inputs, outputs):
    return judge(spec, case, [inputs], {"outputs": [outputs]})


def _cast(tensors, dtypes):
    return tuple(t.to(d) for t, d in zip(tensors, dtypes))


@pytest.mark.parametrize("spec, case", list(_value_cases()))
def test_exact_answer_passes_and_wrong_answers_fail(spec, case):
    inputs = make_input_sets(spec, case, seed=3)[0]
    inputs = spec.on_device(case, inputs) if hasattr(spec, "on_device") else inputs
    op = op_for(spec, inputs)
    if op.against_itself:
        pytest.skip("judged against its own raw outputs (gradcheck): tests/test_parent_checks.py checks it")
    expected = op.reference(inputs)
    dtypes = op.dtypes(inputs)
    if not all(t.numel() for t in expected):
        pytest.skip("empty output: nothing to compare")
    assert _judge_outputs(spec, case, inputs, _cast(expected, dtypes)).passed

    zeros = tuple(torch.zeros_like(t) for t in _cast(expected, dtypes))
    assert not _judge_outputs(spec, case, inputs, zeros).passed, "zeros passed"

    by_shape = {tuple(v.shape): v for v in inputs.values() if isinstance(v, torch.Tensor)}
    echoed = tuple(by_shape.get(tuple(t.shape), torch.zeros_like(t)).to(t.dtype) for t in _cast(expected, dtypes))
    assert not _judge_outputs(spec, case, inputs, echoed).passed, "handing back the input passed"

    has_float_inputs = any(isinstance(v, torch.Tensor) and v.is_floating_point() for v in inputs.values())
    if has_float_inputs and all(d in (torch.float32, torch.float64) for d in dtypes if d.is_floating_point):
        low = {
            k: v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
            for k, v in inputs.items()
        }
        lower = _cast(op.reference(low), dtypes)
        # Where rounding the inputs to bf16 changes no output (a softmax of one column is 1),
        # there is no bf16 error for the tolerance to catch.
        differs = any(not torch.equal(a.double(), e.double()) for a, e in zip(lower, _cast(expected, dtypes)))
        if differs and any(e.is_floating_point() for e in expected):
            assert not _judge_outputs(spec, case, inputs, lower).passed, "a bf16 computation passed"


@pytest.mark.parametrize("where", [0, 6, 7, 40])
@pytest.mark.parametrize("wrong", [float("nan"), float("inf"), 0.25])
def test_the_sliced_comparison_finds_what_the_whole_one_finds(monkeypatch, where, wrong):
    """all_within compares a slice at a time; an element wrong in any slice, the last and
    partial one included, must count as it does in wrong_elements."""
    monkeypatch.setattr("course.judge.SLICE", 7)
    expected = torch.linspace(-2, 2, 41, dtype=torch.float64).reshape(1, 41)
    got = expected.to(torch.float32).clone()
    assert all_within(got, expected, 1e-6, 1e-6)
    got.view(-1)[where] += wrong
    assert not all_within(got, expected, 1e-6, 1e-6)
    assert wrong_elements(got, expected, 1e-6, 1e-6).sum() == 1
    assert "1 of 41 elements differ" in describe_mismatch("y", got, expected, 1e-6, 1e-6)


def test_the_worst_element_is_named_by_its_index():
    expected = torch.zeros(2, 3, 4)
    got = expected.clone()
    got[0, 1, 3], got[1, 2, 0] = 1.0, 5.0
    message = describe_mismatch("y", got, expected, atol=1e-3, rtol=0.0)
    assert "2 of 24 elements differ" in message and "worst at index [1, 2, 0]: expected 0, got 5" in message
