"""bench/unit.py reads a unit's perf cases, baseline and byte counts from its suite. What runs
without a GPU is checked here: the cases it lists, their bytes, and a row timed and judged on
the CPU (a toy suite's, as tests/test_perf.py's)."""

import types

import pytest
import torch
from test_perf import write_toy_unit

from bench import unit as unit_bench
from course.cases import make_input_sets
from course.spec import units


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """tests/test_perf.py's toy suite, in a unit of its own."""
    root = tmp_path_factory.mktemp("bench_toy")
    write_toy_unit(root, "bench_toy")
    return units.load("bench_toy", str(root)).tests(hidden=True)


def test_the_perf_cases_and_a_sweep_keep_each_cases_elements(toy):
    cases = unit_bench.perf_cases(toy, (1024,))
    assert [case.name for case in cases] == [
        "cpu_perf",
        "cpu_perf_unchecked",
        "cpu_perf at 512x1024",
        "cpu_perf_unchecked at 512x1024",
    ]
    assert all(case.kind == "perf" and case.elements == 256 * 2048 for case in cases)
    for bad in (0, 256 * 2048 + 1):
        with pytest.raises(ValueError, match=f"--sweep {bad}: expected a row length"):
            unit_bench.at_row_length(cases[0], bad)
    assert len(unit_bench.perf_cases(toy, (2048,), ((256, 2048),))) == 2  # none again at its own shape
    shaped = unit_bench.perf_cases(toy, shapes=((4, 8),))[2]
    assert shaped.name == "cpu_perf at 4x8" and shaped.params["shape"] == (4, 8)
    assert unit_bench.planned(toy, shaped) == "cpu_perf at 4x8: x [4, 8] float32, 0.0 MB moved"


def test_a_shape_that_is_not_rows_by_cols_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        unit_bench.main(["day08_triton_basics", "--list", "--shapes", "4096by1024"])
    assert "'4096by1024': expected a shape ROWSxCOLS" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--sweep 0: expected a row length"):
        unit_bench.main(["day08_triton_basics", "--list", "--sweep", "0"])


def test_a_planned_case_counts_the_suites_bytes_without_its_data(toy):
    case = unit_bench.perf_cases(toy)[0]
    assert unit_bench.planned(toy, case) == f"cpu_perf: x [256, 2048] float32, {2 * 256 * 2048 * 4 / 1e6:.1f} MB moved"


def test_list_names_every_perf_case_of_a_unit_without_a_gpu(capsys):
    name = "day08_triton_basics"
    unit_bench.main([name, "--list"])
    listed = capsys.readouterr().out.splitlines()
    perf = [case for case in units.load(name).tests(hidden=True).CASES if case.kind == "perf"]
    assert len(listed) == len(perf) > 0
    assert all(line.startswith(f"{case.name}: x [") and line.endswith(" MB moved") for line, case in zip(listed, perf))


@pytest.mark.parametrize(
    "name, says", [("day99_none", "expected one of day01_relu_bias"), ("day02_layernorm_forward", "has no perf cases")]
)
def test_a_unit_without_perf_cases_is_refused_by_name(name, says):
    with pytest.raises(SystemExit, match=says):
        unit_bench.main([name, "--list"])


def test_a_row_is_timed_against_the_baseline_and_its_outputs_judged(toy):
    case = unit_bench.perf_cases(toy)[0]
    # A right answer looked up, not computed: far faster than the baseline, which sleeps 20 ms,
    # however busy the CPU.
    answers = {
        tuple(s["x"][0, :4].tolist()): torch.softmax(s["x"], 1) for s in make_input_sets(toy, case, unit_bench.SEED)
    }
    looked_up = types.SimpleNamespace(row_softmax=lambda x: answers[tuple(x[0, :4].tolist())])
    right = unit_bench.timed_row(toy, looked_up, case, None)
    assert not right.wrong and right.nbytes == 2 * 256 * 2048 * 4
    assert right.baseline.median_ms >= 20 > right.ours.median_ms
    wrong = unit_bench.timed_row(toy, types.SimpleNamespace(row_softmax=torch.exp), case, None)
    assert wrong.wrong and "was wrong" in wrong.problem
