"""day02 LayerNorm forward: the reference passes every case, the template fails with TODOs."""
import os
import subprocess

import pytest

from course.public import run_case
from helpers import build_unit, load_spec
from conftest import HAS_GPU

UNIT = "day02_layernorm_forward"
pytestmark = pytest.mark.day02
SPEC = load_spec(UNIT)
DEVICES = ("cpu", "cuda") if HAS_GPU else ("cpu",)


@pytest.mark.parametrize("case", [c for c in SPEC.CASES if c.device in DEVICES], ids=lambda c: c.name)
def test_solution_passes(case, build_root):
    module, _ = build_unit(UNIT, "solution", build_root)
    verdict = run_case(SPEC, module, case, seed=1234)
    assert verdict.passed, verdict.message


def test_template_fails_with_todo_messages(build_root):
    module, _ = build_unit(UNIT, "template", build_root)
    for case in load_spec(UNIT, public_only=True).CASES:
        if case.device in DEVICES:
            verdict = run_case(SPEC, module, case, seed=1)
            assert not verdict.passed
            if case.kind == "values":
                assert "TODO(day02): layernorm_forward.cu, warp_reduce_sum" in verdict.message


@pytest.mark.parametrize("arch", ["75", "90"])
@pytest.mark.parametrize("kind", ["solution", "template"])
def test_kernel_compiles_for_turing_and_hopper(arch, kind, nvcc, tmp_path):
    from course import units

    unit = units.load(UNIT)
    unit.write(kind, str(tmp_path))
    result = subprocess.run([nvcc, "-c", "-O3", f"-gencode=arch=compute_{arch},code=sm_{arch}", "-std=c++17",
                             str(tmp_path / "layernorm_forward.cu"), "-o", str(tmp_path / "k.o")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert os.path.getsize(tmp_path / "k.o") > 0


def test_unstable_variance_fails_the_large_mean_case():
    """E[x^2] - E[x]^2 in float32 loses the variance when |mean| >> std: the case must catch it."""
    from course.cases import make_input_sets
    from course.judge import judge

    case = next(c for c in SPEC.CASES if c.name == "cpu_fp32_large_mean")
    inputs = make_input_sets(SPEC, case, seed=5)[0]
    x, gamma, beta, eps = inputs["x"], inputs["gamma"], inputs["beta"], inputs["eps"]
    mean = x.mean(dim=1)
    var = (x * x).mean(dim=1) - mean * mean
    rstd = (var + eps).rsqrt()
    y = (x - mean[:, None]) * rstd[:, None] * gamma + beta
    assert not judge(SPEC, case, [inputs], {"outputs": [(y, mean, rstd)]}).passed
