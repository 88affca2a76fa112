"""day02 specifics beyond what every unit gets (tests/test_units.py)."""

import pytest
from helpers import load_spec

from course.cases import make_input_sets
from course.judge import judge

pytestmark = pytest.mark.day02
SPEC = load_spec("day02_layernorm_forward")


def test_unstable_variance_fails_the_large_mean_case():
    """E[x^2] - E[x]^2 in float32 loses the variance when |mean| >> std: the case must catch it."""
    case = next(c for c in SPEC.CASES if c.name == "cpu_fp32_large_mean")
    inputs = make_input_sets(SPEC, case, seed=5)[0]
    x, gamma, beta, eps = inputs["x"], inputs["gamma"], inputs["beta"], inputs["eps"]
    mean = x.mean(dim=1)
    var = (x * x).mean(dim=1) - mean * mean
    rstd = (var + eps).rsqrt()
    y = (x - mean[:, None]) * rstd[:, None] * gamma + beta
    assert not judge(SPEC, case, [inputs], {"outputs": [(y, mean, rstd)]}).passed
