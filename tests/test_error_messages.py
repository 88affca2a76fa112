"""Error cases (solutions/common/error_cases.py, judged by course/judge.py): the op's message
must name the argument at fault and no other, so that one message naming every argument
cannot pass them all. No build: the judge reads the message as data."""

import pytest

from course.judge import judge
from course.spec import units

ERROR_CASES = [
    pytest.param(unit, case, id=f"{unit.name}-{case.name}")
    for unit in units.all_units()
    if unit.has_tests()
    for case in unit.tests(hidden=True).CASES
    if case.kind == "error"
]


def _verdict(unit, case, message: str):
    suite = unit.tests(hidden=True)
    result = {"error": ("RuntimeError", message)}
    return judge(suite, case, [], result)


def _names_every_argument(unit, case) -> str:
    """The op's arguments in order, then every word any error case of the unit asks for."""
    words = {w for c in unit.tests(hidden=True).CASES if c.kind == "error" for w in c.error_words}
    rest = sorted(words - set(case.error_arguments))
    return f"op: {', '.join(case.error_arguments)} must be right ({' '.join(rest)})"


@pytest.mark.parametrize("unit, case", ERROR_CASES)
def test_every_error_case_names_the_ops_arguments_its_own_among_them(unit, case):
    assert case.error_arguments and case.error_arguments[0] == "x", case.error_arguments
    assert len(set(case.error_arguments)) == len(case.error_arguments)


@pytest.mark.parametrize("unit, case", ERROR_CASES)
def test_a_message_naming_every_argument_fails_every_error_case(unit, case):
    if len(case.error_arguments) < 2:
        pytest.skip("an op of one argument: naming it is naming the one at fault")
    verdict = _verdict(unit, case, _names_every_argument(unit, case))
    assert not verdict.passed and "should name" in verdict.message, verdict


@pytest.mark.parametrize("unit, case", ERROR_CASES)
def test_a_message_naming_its_own_argument_passes_and_may_compare_it_with_x(unit, case):
    own = " and ".join(case.error_words)
    assert _verdict(unit, case, f"op: {own} is wrong").passed
    assert _verdict(unit, case, f"op: {own} must match x (cpu, float32, [4, 64])").passed


def test_the_argument_at_fault_comes_before_x_and_no_other_is_named():
    unit = units.load("day01_relu_bias")
    case = next(c for c in unit.tests(hidden=True).CASES if c.name == "error_bias_dtype")
    verdict = _verdict(unit, case, "relu_bias: x must have the dtype of bias")
    assert not verdict.passed and "'bias' first" in verdict.message
    unit = units.load("day02_layernorm_forward")
    case = next(c for c in unit.tests(hidden=True).CASES if c.name == "error_gamma_dtype")
    verdict = _verdict(unit, case, "layernorm forward: gamma must have the dtype of beta")
    assert not verdict.passed and "not 'beta'" in verdict.message
