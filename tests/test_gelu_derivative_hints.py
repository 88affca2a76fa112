"""day06: where a backward case fails, the test says which term of GELU's derivative is off.
The mutants that plant a slip in deriving it (solutions/day06_bias_gelu/mutants.toml) are
built, and every case each loses with a dx to read shows the slip its `diagnosis` names."""

import dataclasses

import pytest
import torch

from course.loading import build_and_load
from course.public import run_case
from course.spec import mutants, units

UNIT = units.load("day06_bias_gelu")
SLIPS = ("erf_grad_without_u_pdf", "tanh_grad_one_minus_t")  # one per form, in gelu_math.h


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """One build with every slip planted: each is in its own form's derivative, so a case sees
    only its form's slip, and one build serves them all."""
    found = mutants.load(UNIT)
    edits = tuple(edit for name in SLIPS for edit in found[name].edits)
    folder = tmp_path_factory.mktemp("gelu_slips")
    mutants.write(UNIT, dataclasses.replace(found[SLIPS[0]], edits=edits), str(folder / "src"))
    module, _ = build_and_load(UNIT.plan(), str(folder / "src"), str(folder / "build"))
    return module


@pytest.mark.parametrize("name", SLIPS)
def test_every_lost_case_with_a_dx_names_the_planted_slip(planted, name):
    """On the CPU, and on the GPU where there is one: the kernels call the same derivative."""
    spec = UNIT.tests(hidden=True)
    mutant = mutants.load(UNIT)[name]
    lost = mutant.expected_losses([case.name for case in spec.CASES])
    devices = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
    # gradcheck's outputs are Jacobians, judged against themselves, and a perf case is not
    # timed once its correctness cases are lost: neither has a dx to read
    read = [
        case
        for case in spec.CASES
        if case.name in lost and case.device in devices and case.kind != "perf" and case.params["op"] != "gradcheck"
    ]
    assert all(mutant.diagnosis_for(case.name) for case in read) and len(read) >= 5, [case.name for case in read]
    for case in read:
        verdict = run_case(spec, planted, case, seed=3)
        assert not verdict.passed and mutant.diagnosis_for(case.name) in verdict.message, (case.name, verdict.message)
