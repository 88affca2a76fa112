"""Perf cases and the shared benchmark harness, on the CPU: a toy unit (a row softmax
written in Python) is graded end to end with a fast, a slow and a wrong submission, each
timed against the toy's reference solution."""

import dataclasses
import json
import os
import subprocess
import sys
import time
import types

import pytest
import torch
from helpers import explain

from autograder import report, results
from autograder.grade import grade
from autograder.grade_options import GradeOptions
from autograder.results import Grade
from course import bench
from course.cases import Case, check_needs, make_input_sets
from course.harness import empty_is_nan, execute
from course.judge import perf_fraction
from course.public import run_case
from course.spec import units

pytestmark = pytest.mark.autograder

TOY_SPEC = """
import time

import torch

from course.cases import Case
from course.ops import Op


def make_inputs(case, generator):
    rows, cols = case.params["shape"]
    return {"x": torch.randn(rows, cols, generator=generator)}


def baseline(inputs):
    time.sleep(0.02)  # see PERF
    return torch.softmax(inputs["x"], dim=1)


def bytes_moved(inputs):
    return 2 * inputs["x"].numel() * inputs["x"].element_size()


OPS = {"row_softmax": Op(call=lambda ext, inputs: ext.row_softmax(inputs["x"]),
                         reference=lambda inputs: (torch.softmax(inputs["x"].double(), dim=1),), outputs=("y",),
                         dtypes=lambda inputs: (inputs["x"].dtype,), tolerance=lambda inputs: (1e-6, 1e-5))}

# The baseline and the reference sleep 20 ms, the slow submission 200 ms and the fast one not at all (softmax
# itself takes under 1 ms): the fast one measured 74x and the slow one 0.1x, each far from its
# threshold however much a loaded CI core slows softmax (against itself it once read 0.22x).
PERF = dict(shape=(256, 2048), full_at=1.0, zero_at=0.5)
CASES = [
    Case("cpu_values", "cpu_values", "cpu", 1.0, dict(shape=(8, 100))),
    Case("cpu_perf", "cpu_perf", "cpu", 5.0, PERF, kind="perf", needs=("cpu_values",)),
    Case("cpu_perf_unchecked", "cpu_perf", "cpu", 5.0, PERF, kind="perf"),
]
"""

# The toy's reference solution, which the grader times beside each submission: as slow as the
# baseline, so the thresholds read as before against either.
REFERENCE = "import time\nimport torch\n\nopen('reference_imported', 'w').close()\n\ndef row_softmax(x):\n    time.sleep(0.02)\n    return torch.softmax(x, dim=1)\n"

SUBMISSIONS = {
    # Also leaves a file where it was imported (its child's folder, the only one it may
    # write): never in the children that time torch's op.
    "fast": (
        "import torch\n\nopen('imported', 'w').close()\n\ndef row_softmax(x):\n    return torch.softmax(x, dim=1)\n"
    ),
    "slow": "import time\nimport torch\n\ndef row_softmax(x):\n    time.sleep(0.2)\n    return torch.softmax(x, dim=1)\n",
    "wrong": "import torch\n\ndef row_softmax(x):\n    return torch.exp(x)  # fast, because it skips the hard part\n",
    # Slow, but answers a call on the same buffer, unchanged since (address and version
    # counter), from a cache that keeps x alive: timed on the same tensors every call, it
    # would look as fast as a lookup.
    "caches_by_version": (
        "import time\nimport torch\n\n_cache = {}\n\n"
        "def row_softmax(x):\n    key = (x.data_ptr(), x._version)\n"
        "    if key not in _cache:\n        time.sleep(0.2)\n"
        "        _cache[key] = (x, torch.softmax(x, dim=1))\n    return _cache[key][1]\n"
    ),
}


def write_toy_unit(root, name: str):
    """A unit of Python alone (build kind none) under root/solutions/: its op is the
    submission's row_softmax(), its suite TOY_SPEC; returns its folder."""
    folder = root / "solutions" / name
    folder.mkdir(parents=True)
    (folder / "unit.toml").write_text(
        'title = "a toy"\nsources = ["row_softmax.py"]\nbuild = "none"\nload = "python"\n'
    )
    (folder / "public_tests.py").write_text(TOY_SPEC)
    (folder / "hidden_tests.py").write_text("from .public_tests import *  # noqa: F403\n")
    return folder


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    (write_toy_unit(root, "perf_toy") / "row_softmax.py").write_text(REFERENCE)
    return units.load("perf_toy", str(root)), root


@pytest.fixture(scope="module")
def graded(toy):
    """graded(kind) -> (Grade, results.json as a dict, {"submission": the folders of the children
    that imported the submission, "reference": those that imported the reference})."""
    unit, root = toy
    done = {}

    def run(kind):
        if kind not in done:
            folder = root / kind
            folder.mkdir()
            (folder / "row_softmax.py").write_text(SUBMISSIONS[kind])
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("OMP_NUM_THREADS", "1")  # one thread per child: steadier timings on a busy CPU
                result = grade(
                    str(folder),
                    unit,
                    GradeOptions(seed=3, work=str(root / f"{kind}.work"), has_gpu=False, keep_work=True),
                )
            path = report.write(result, str(root / f"{kind}.out"))
            with open(path) as handle:
                data = json.load(handle)
            imports = {
                who: [p.parent.name for p in (root / f"{kind}.work").glob(f"grade_*/*/{marker}")]
                for who, marker in (("submission", "imported"), ("reference", "reference_imported"))
            }
            done[kind] = result, data, imports
        return done[kind]

    return run


def _test(data, name):
    return next(t for t in data["tests"] if t["name"] == name)


def test_perf_fraction_is_linear_between_zero_and_full():
    assert perf_fraction(1.2, full_at=1.0, zero_at=0.5) == 1.0
    assert perf_fraction(1.0, full_at=1.0, zero_at=0.5) == 1.0
    assert perf_fraction(0.75, full_at=1.0, zero_at=0.5) == pytest.approx(0.5)
    assert perf_fraction(0.5, full_at=1.0, zero_at=0.5) == 0.0
    assert perf_fraction(0.1, full_at=1.0, zero_at=0.5) == 0.0
    with pytest.raises(ValueError):
        perf_fraction(1.0, full_at=0.5, zero_at=0.5)


def test_needs_must_name_existing_cases():
    check_needs([Case("a", "g"), Case("b", "g", needs=("a",))])
    with pytest.raises(ValueError, match="c"):
        check_needs([Case("a", "g"), Case("b", "g", needs=("c",))])


def test_fast_submission_gets_full_points(graded):
    result, data, imports = graded("fast")
    assert {t.name for t in result.tests if not t.passed} == set(), explain(result)
    for name in ("cpu_perf", "cpu_perf_unchecked"):
        test = _test(data, name)
        assert test["score"] == 5 and test["status"] == "passed", test["output"]
        assert "x torch -> 5/5 points (full at 1.00x the reference, zero at 0.50x)" in test["output"]
        assert "on x [256, 2048] float32" in test["output"]
        timing = data["extra_data"]["perf"][name]
        assert timing["ratio"] == pytest.approx(timing["reference_ms"] / timing["ours_ms"])
        assert timing["torch_ratio"] == pytest.approx(timing["torch_ms"] / timing["ours_ms"])
        assert timing["reference_ms"] >= 20 and timing["ours_gbs"] > 0 and timing["torch_gbs"] > 0
    assert data["score"] == 12  # with the build and the values case
    # The student's code ran in its own children, never in those that timed torch's op and the
    # reference; the reference ran in those, never beside the student's code.
    assert imports["submission"] and all(f.startswith("run_") for f in imports["submission"]), imports
    assert imports["reference"] and all(f.startswith("baseline_") for f in imports["reference"]), imports


def test_slow_submission_gets_no_points(graded):
    result, data, _ = graded("slow")
    assert _test(data, "cpu_values")["status"] == "passed"
    for name in ("cpu_perf", "cpu_perf_unchecked"):
        test = _test(data, name)
        assert test["score"] == 0 and test["status"] == "failed", test["output"]
        assert "-> 0/5 points" in test["output"]
        assert data["extra_data"]["perf"][name]["ours_ms"] >= 200
    assert data["score"] == 2


def test_a_cache_by_address_and_version_earns_nothing_for_speed(graded):
    """Every timed call gets its inputs in new storage: the cache never hits, so the time is
    the slow computation's."""
    _, data, _ = graded("caches_by_version")
    for name in ("cpu_perf", "cpu_perf_unchecked"):
        test = _test(data, name)
        assert test["score"] == 0 and data["extra_data"]["perf"][name]["ours_ms"] >= 200, test["output"]


def test_fresh_inputs_copy_every_tensor_into_new_storage():
    base = torch.arange(40.0).reshape(5, 8)
    view = base[1:, ::2]  # an offset into its storage, and strides of its own
    leaf = torch.ones(3, requires_grad=True)
    output = leaf * 2  # a graph torch's backward is timed on: copies would be cut off from it
    fresh = bench.fresh_inputs(({"x": view, "eps": 1e-5}, [leaf, output]))
    x = fresh[0]["x"]
    assert torch.equal(x, view) and x.stride() == view.stride() and x.storage_offset() == view.storage_offset()
    assert x.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    assert fresh[0]["eps"] == 1e-5 and fresh[1][0] is leaf and fresh[1][1] is output
    (grad,) = torch.autograd.grad(fresh[1][1].sum(), fresh[1][0])
    assert torch.equal(grad, torch.full((3,), 2.0))


def test_fresh_inputs_copy_an_expanded_tensor():
    """A broadcast input (a stride of 0) reads one element many times: its copy keeps that layout."""
    column = torch.arange(4.0).reshape(4, 1)
    wide = column.expand(4, 8)
    fresh = bench.fresh_inputs(wide)
    assert torch.equal(fresh, wide) and fresh.stride() == (1, 0)
    assert fresh.untyped_storage().data_ptr() != column.untyped_storage().data_ptr()


def test_every_input_set_is_timed_and_its_output_kept():
    """More input sets than the least, or the most, number of timed calls: each set is still
    called, so the judge has every set's output to check."""
    sets = [(torch.full((2,), float(i)),) for i in range(13)]
    timing = bench.time_op(lambda x: x + 1, sets, warmup=1, min_reps=3, max_reps=5, target_spread=10.0)
    assert timing.reps >= 13
    assert all(out is not None and torch.equal(out, args[0] + 1) for out, args in zip(timing.last_outputs, sets))


def test_the_baseline_process_makes_the_profiled_call_with_the_reference(monkeypatch):
    """After a GPU perf case the student's process calls the op once more under the profiler;
    the process that times the reference makes that call with the reference, so that both
    time their next cases after the same history."""
    from autograder import child

    calls = []
    monkeypatch.setattr(child, "profiled_run", lambda spec, ext, case, inputs: calls.append((ext, case, inputs)))
    child._profile_alike("spec", "the reference", "the profiled case", "first set")
    assert calls == [("the reference", "the profiled case", "first set")]


def test_wrong_submission_earns_nothing_for_speed(graded):
    result, data, _ = graded("wrong")
    assert _test(data, "cpu_values")["status"] == "failed"
    needing = _test(data, "cpu_perf")
    assert needing["score"] == 0 and needing["output"] == "not timed: cpu_values must pass first"
    unchecked = _test(data, "cpu_perf_unchecked")
    assert unchecked["score"] == 0 and unchecked["status"] == "failed"
    assert (
        "output of the timed calls on input set 1 of 3 was wrong" in unchecked["output"] and "y:" in unchecked["output"]
    )
    assert data["extra_data"]["perf"] == {} and data["score"] == 1  # the build


def test_fractional_scores_in_table_and_json():
    result = Grade(
        "toy",
        tests=[
            results.TestResult("build", 1.0, True, "compiled", visibility="visible"),
            results.TestResult(
                "perf", 5.0, True, "yours 1.000 ms, torch 0.850 ms: 0.85x torch -> 3.5/5 points", fraction=0.7
            ),
            results.TestResult("values", 1.0, False, "y: 3 of 8 elements differ"),
        ],
    )
    data = report.results_json(result)
    assert [t["score"] for t in data["tests"]] == [1.0, 3.5, 0.0] and data["score"] == 4.5
    assert [t["status"] for t in data["tests"]] == ["passed", "passed", "failed"]
    table = report.table(result)
    assert "3.5/5" in table and "0.85x torch" in table and "4.5/7 points" in table


# The harness and the bench helpers in this process, with a module-like object as the op.
def _spec_and_case(toy):
    spec = toy[0].tests()
    return spec, next(c for c in spec.CASES if c.name == "cpu_perf_unchecked")


def test_execute_times_the_op_or_torchs_own(toy):
    spec, case = _spec_and_case(toy)
    input_sets = make_input_sets(spec, case, seed=1)
    assert len(input_sets) == 3
    ours = execute(spec, types.SimpleNamespace(row_softmax=lambda x: torch.softmax(x, 1)), case, input_sets)
    torchs = execute(spec, None, case, input_sets)
    assert set(torchs) == {"timing"} and torchs["timing"]["reps"] >= 10
    assert ours["timing"]["median_ms"] > 0 and len(ours["outputs"]) == 3
    assert ours["output_devices"] == [("cpu",)] * 3
    for outputs, inputs in zip(ours["outputs"], input_sets):  # the last timed call's, on each set
        assert torch.allclose(outputs[0], torch.softmax(inputs["x"], 1))


def test_an_own_code_case_imports_no_compiler(toy):
    """The own-code check sees ATen ops twice, under the profiler and in a dispatch mode. torch's
    profiler wrapper imports torch._inductor on its first start, and its guard on a mode's
    __torch_dispatch__ torch._dynamo on the first op: seconds inside the first such case of each
    test process. A fresh interpreter shows whether they were loaded."""
    unit, root = toy
    script = f"""
import dataclasses, json, sys, types
import torch
from course.spec import units
from course.cases import OWN_KERNEL, make_input_sets
from course.harness import execute
spec = units.load("perf_toy", {str(root)!r}).tests()
case = dataclasses.replace(next(c for c in spec.CASES if c.name == "cpu_values"), checks=(OWN_KERNEL,))
result = execute(spec, types.SimpleNamespace(row_softmax=lambda x: torch.softmax(x, 1)), case,
                 make_input_sets(spec, case, seed=1))
print(json.dumps([result["ops"], [m for m in ("torch._dynamo", "torch._inductor") if m in sys.modules]]))
"""
    repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": repository},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    ops, loaded = json.loads(run.stdout.strip().splitlines()[-1])
    assert "aten::_softmax" in ops and loaded == [], run.stdout


def test_timed_calls_run_without_nan_filling(toy):
    """Specs wrap their op in empty_is_nan; while a perf case is timed it must not fill new
    memory (a write of every output torch's time would not have), elsewhere it must."""
    spec, case = _spec_and_case(toy)
    seen = []

    def row_softmax(x):
        seen.append(torch.are_deterministic_algorithms_enabled())
        return torch.softmax(x, 1)

    def call(ext, inputs):
        with empty_is_nan():
            return ext.row_softmax(inputs["x"])

    wrapped = types.SimpleNamespace(**vars(spec))
    wrapped.OPS = {"row_softmax": dataclasses.replace(spec.OPS["row_softmax"], call=call)}
    execute(wrapped, types.SimpleNamespace(row_softmax=row_softmax), case, make_input_sets(spec, case, seed=1))
    assert seen and not any(seen)
    with empty_is_nan():
        assert torch.are_deterministic_algorithms_enabled()


def test_public_run_case_times_both_in_process(toy):
    spec, case = _spec_and_case(toy)
    # A right answer far faster than torch's op (looked up, not computed), so that a burst of
    # load on a shared CI core cannot push the ratio under full_at: torch.softmax against
    # itself once measured 0.05x there.
    answers = {tuple(s["x"][0, :4].tolist()): torch.softmax(s["x"], 1) for s in make_input_sets(spec, case, seed=1)}
    looked_up = types.SimpleNamespace(row_softmax=lambda x: answers[tuple(x[0, :4].tolist())])
    fast = run_case(spec, looked_up, case, seed=1)
    assert fast.passed and fast.fraction == 1.0 and "-> 5/5 points" in fast.message
    wrong = run_case(spec, types.SimpleNamespace(row_softmax=torch.exp), case, seed=1)
    assert not wrong.passed and wrong.fraction == 0.0 and "was wrong" in wrong.message


def test_compare_marks_a_fast_wrong_op_and_formats_the_table():
    arg_sets = [(torch.randn(64, 512),) for _ in range(3)]

    def check(outputs, args):
        return "" if torch.allclose(outputs, torch.softmax(args[0], 1)) else "differs from torch.softmax"

    nbytes = 2 * 64 * 512 * 4
    right = bench.compare(
        "right",
        lambda x: torch.softmax(x, 1),
        lambda x: torch.softmax(x, 1),
        arg_sets,
        nbytes,
        check=check,
        ceiling=10.0,
        d=512,
    )
    wrong = bench.compare("wrong", torch.exp, lambda x: torch.softmax(x, 1), arg_sets, nbytes, check=check, d=512)
    assert not right.wrong and right.speedup > 0 and right.of_ceiling == pytest.approx(right.ours_gbs / 10.0)
    assert wrong.wrong and wrong.problem == "differs from torch.softmax"
    table = bench.format_table([right, wrong], 10.0, "softmax").splitlines()
    assert table[0].startswith("softmax: ") and f"torch {torch.__version__}" in table[0] and "10 GB/s" in table[0]
    assert table[2].startswith("right") and table[2].endswith("ok")
    assert table[3].startswith("wrong") and "WRONG: differs from torch.softmax" in table[3]


def test_plot_is_skipped_quietly_without_matplotlib(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    timing = bench.Timing(1.0, 0.01, 10)
    assert bench.plot_gbs([bench.Row("r", 1 << 20, timing, timing, d=64)]) is None


def _gpu_busy(ms: float):
    """A call that keeps the GPU busy for about `ms` and launches nothing else."""
    bench._hold_stream(ms)


@pytest.mark.gpu
@pytest.mark.timed
def test_gpu_time_leaves_out_host_work_done_while_the_gpu_was_busy():
    # 0.3 ms of host work before a 2 ms kernel: the flush alone does not cover it, so without
    # the hold the events would measure about 2.3 ms.
    alone = bench.time_op(_gpu_busy, [(2.0,)], device="cuda")
    with_host_work = bench.time_op(lambda ms: (time.sleep(0.0003), _gpu_busy(ms)), [(2.0,)], device="cuda")
    assert not with_host_work.host_bound
    assert with_host_work.median_ms < alone.median_ms + 0.1, (with_host_work, alone)


@pytest.mark.gpu
@pytest.mark.timed
def test_an_op_that_waits_for_the_gpu_is_charged_its_time_once():
    """An op that synchronizes (.item(), a copy to the host) costs its GPU time plus its host
    time, called back to back; the hold before each timed call must not be charged to it too."""

    def waits(ms):
        _gpu_busy(ms)
        torch.cuda.current_stream().synchronize()

    timing = bench.time_op(waits, [(1.0,)], device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        waits(1.0)
    back_to_back_ms = (time.perf_counter() - start) * 1e3 / 20
    assert timing.median_ms == pytest.approx(back_to_back_ms, rel=0.25), (timing, back_to_back_ms)
    async_op = bench.time_op(_gpu_busy, [(1.0,)], device="cuda")  # the hold stays for ops that do not wait
    assert async_op.median_ms == pytest.approx(1.0, rel=0.2) and not async_op.host_bound, async_op


@pytest.mark.gpu
@pytest.mark.timed
def test_an_op_whose_kernels_end_before_its_host_work_keeps_its_hold():
    """Host work, a short kernel, more host work: the stream is idle when the op returns, yet the
    op never waited for the GPU. Its GPU time is its kernel's, not the host work before it."""

    def host_heavy(ms):
        time.sleep(0.002)
        _gpu_busy(ms)
        time.sleep(0.002)

    timing = bench.time_op(host_heavy, [(0.05,)], device="cuda")
    assert timing.host_bound and timing.gpu_ms < 0.5, timing


@pytest.mark.gpu
@pytest.mark.timed
def test_host_bound_call_is_charged_the_host_time():
    timing = bench.time_op(
        lambda ms: (time.sleep(0.005), _gpu_busy(ms)), [(0.05,)], min_reps=5, max_reps=5, device="cuda"
    )
    assert timing.host_bound and timing.median_ms >= 5.0, timing
    table = bench.format_table([bench.Row("slow host", bench.GPU_BOUND_BYTES, timing, timing)])
    assert "*" in table.splitlines()[2] and "host-bound" in table.splitlines()[3]


def test_on_a_gpu_rows_under_the_gpu_bound_bytes_are_reported_as_host_time():
    large = bench.Timing(0.5, 0.01, 10, gpu_ms=0.5, host_ms=0.1, on_gpu=True)
    small = bench.Timing(0.08, 0.01, 10, host_bound=True, gpu_ms=0.02, host_ms=0.08, on_gpu=True)
    rows = [bench.Row("large", bench.GPU_BOUND_BYTES, large, large), bench.Row("small", 1 << 20, small, small)]
    kernels, host = bench.format_table(rows, 1000.0).split("under 64 MB moved")
    assert "large" in kernels and "small" not in kernels
    assert "small" in host and "80.0" in host and "20.0" in host
    on_cpu = bench.Timing(0.08, 0.01, 10, gpu_ms=0.08, host_ms=0.08)  # one table, as before
    assert "under 64 MB" not in bench.format_table([bench.Row("cpu", 1 << 20, on_cpu, on_cpu)])


_side_stream = None


def _busy_on_a_side_stream(ms: float):
    """0.05 ms on the current stream, `ms` on another stream that nobody waits for."""
    global _side_stream
    _side_stream = _side_stream or torch.cuda.Stream()
    with torch.cuda.stream(_side_stream):
        bench._hold_stream(ms)
    bench._hold_stream(0.05)


@pytest.mark.parametrize(
    "wholes, unseen, median", [([1.0], False, 0.9), ([5.0, 1.0], False, 0.9), ([5.0, 4.0], True, 4.0)]
)
def test_a_slow_set_of_whole_calls_is_judged_by_a_second(monkeypatch, wholes, unseen, median):
    """Whole calls over the events' time say that work was missed only when a second set agrees: a
    hiccup slows one set, hidden work both. (The GPU's timers faked: this runs on the CPU.)"""
    sets = iter(wholes)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    monkeypatch.setattr(bench, "_waits_for_gpu", lambda fn, args, hold_ms: False)
    monkeypatch.setattr(bench, "_cuda_call_ms", lambda fn, args, hold_ms: (0.9, 0.05, None))
    monkeypatch.setattr(bench, "_whole_call_ms", lambda fn, arg_sets: next(sets))
    timing = bench.time_op(lambda: None, [()], min_reps=3, max_reps=3, device="cuda")
    assert timing.unseen == unseen and timing.median_ms == pytest.approx(median), timing
    assert next(sets, None) is None, "every set of whole calls asked for was measured"


@pytest.mark.parametrize("waits, unseen, median", [(True, True, 2.0), (False, False, 1.0)])
def test_whole_calls_of_an_op_that_waits_are_judged_against_its_events_alone(monkeypatch, waits, unseen, median):
    """Without a hold (an op that waits for the GPU) the events span the host's enqueueing too:
    whole calls are compared with the longer of the two times, not their sum, or work elsewhere
    as long as the host's time would pass unseen. With a hold the two add up. (Faked timers.)"""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    monkeypatch.setattr(bench, "_waits_for_gpu", lambda fn, args, hold_ms: waits)
    monkeypatch.setattr(bench, "_cuda_call_ms", lambda fn, args, hold_ms: (1.0, 0.9, None))
    monkeypatch.setattr(bench, "_whole_call_ms", lambda fn, arg_sets: 2.0)
    timing = bench.time_op(lambda: None, [()], min_reps=3, max_reps=3, device="cuda")
    assert timing.unseen == unseen and timing.median_ms == pytest.approx(median), timing


@pytest.mark.gpu
@pytest.mark.timed
def test_work_left_on_another_stream_is_timed_whole():
    honest = bench.time_op(_gpu_busy, [(2.0,)], device="cuda")
    assert not honest.unseen and honest.median_ms == pytest.approx(2.0, rel=0.2), honest
    hiding = bench.time_op(_busy_on_a_side_stream, [(2.0,)], device="cuda")
    assert hiding.unseen and hiding.median_ms > 1.5, hiding
    host_bound = bench.time_op(lambda ms: (time.sleep(0.005), _gpu_busy(ms)), [(0.05,)], device="cuda")
    assert not host_bound.unseen, host_bound


@pytest.mark.gpu
@pytest.mark.timed
def test_patching_torchs_timers_does_not_reach_the_timer(monkeypatch):
    """What a submission's code can do at import in its own process."""
    true = bench.time_op(_gpu_busy, [(2.0,)], device="cuda")
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.001)
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    patched = bench.time_op(_gpu_busy, [(2.0,)], device="cuda")
    assert patched.median_ms == pytest.approx(true.median_ms, rel=0.2), (patched, true)


def test_every_public_perf_case_says_how_fast_the_reference_ran():
    """The notebook has no reference: its perf verdict is an estimate from torch's time, scaled
    by the reference's speed against torch measured on a GPU. A public case without that
    number would estimate against torch itself, unscaled."""
    for unit in units.all_units():
        for case in unit.tests(hidden=False).CASES:
            if case.kind == "perf":
                assert case.params.get("reference_vs_torch", 0) > 0, f"{unit.name}: {case.name}"
                assert case.params["full_at"] > case.params["zero_at"] >= 0, f"{unit.name}: {case.name}"


def test_a_reference_that_cannot_run_leaves_the_perf_cases_not_run(tmp_path):
    """A reference that fails in its child (here: at import) costs the perf cases, reported as
    not run with the reason, and nothing else of the grading."""
    folder = tmp_path / "solutions" / "perf_toy_broken"
    folder.mkdir(parents=True)
    (folder / "unit.toml").write_text(
        'title = "a toy"\nsources = ["row_softmax.py"]\nbuild = "none"\nload = "python"\n'
    )
    (folder / "public_tests.py").write_text(TOY_SPEC)
    (folder / "hidden_tests.py").write_text("from .public_tests import *  # noqa: F403\n")
    (folder / "row_softmax.py").write_text("raise RuntimeError('the reference is broken')\n")
    unit = units.load("perf_toy_broken", str(tmp_path))
    submission = tmp_path / "fast"
    submission.mkdir()
    (submission / "row_softmax.py").write_text(SUBMISSIONS["fast"])
    result = grade(str(submission), unit, GradeOptions(seed=3, work=str(tmp_path / "work"), has_gpu=False))
    by_name = {t.name: t for t in result.tests}
    assert by_name["build"].passed and by_name["cpu_values"].passed, explain(result)
    for name in ("cpu_perf", "cpu_perf_unchecked"):
        test = by_name[name]
        assert test.not_run and not test.passed, test.output
        assert test.output.startswith("not run: the reference could not be timed here")
        assert "the reference is broken" in test.output, test.output


def test_gradings_side_by_side_build_the_reference_once(toy, tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from autograder import reference as reference_module
    from course.build import Built

    monkeypatch.setenv(reference_module.CACHE_ENV, str(tmp_path / "cache"))
    builds = []

    def slow_build(plan, source_dir, build_dir, **options):
        builds.append((plan.name, options["env"].get("CCACHE_DISABLE")))  # never into the cache builds read
        time.sleep(0.5)  # long enough for the other grading to arrive while this one builds
        return Built()

    monkeypatch.setattr(reference_module, "build_in_subprocess", slow_build)
    with ThreadPoolExecutor(2) as pool:
        found = list(pool.map(lambda _: reference_module.reference(toy[0], {}), range(2)))
    assert builds == [("perf_toy", "1")] and found[0] == found[1]
    assert (tmp_path / "cache" / os.path.basename(found[0].folder) / "src" / "row_softmax.py").exists()


def test_the_reference_is_fetched_while_the_submission_builds(toy, tmp_path, monkeypatch):
    """A cold reference build must not add its time to a grading: it starts with the grading,
    in a thread, and the student's build runs meanwhile."""
    import threading

    from autograder import baselines as baselines_module
    from autograder import grade as grade_module

    unit = toy[0]
    started = threading.Event()
    real_reference, real_build = baselines_module.reference, grade_module.build_sources

    def reference(*args, **options):
        started.set()
        return real_reference(*args, **options)

    def build(*args, **options):
        assert started.wait(30), "the student's build began and no reference was being fetched"
        return real_build(*args, **options)

    monkeypatch.setattr(baselines_module, "reference", reference)
    monkeypatch.setattr(grade_module, "build_sources", build)
    submission = tmp_path / "fast"
    submission.mkdir()
    (submission / "row_softmax.py").write_text(SUBMISSIONS["fast"])
    result = grade(
        str(submission),
        unit,
        GradeOptions(seed=3, work=str(tmp_path / "work"), has_gpu=False, tests=("cpu_values", "cpu_perf")),
    )
    # Both ran against the fetched reference (how fast the toy ran is not this test's concern:
    # other tests share the machine's cores).
    judged = {t.name for t in result.tests if t.passed or t.fraction is not None}
    assert {"cpu_values", "cpu_perf"} <= judged, explain(result)
    assert not any(t.not_run for t in result.tests) and "reference_build_s" in result.timings
