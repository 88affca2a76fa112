"""The observer (autograder/observer/): its library builds, its records are read whatever the
pipe holds, the verdicts on synthetic records, the fallback without it; on a GPU, a reference
perf case observed end to end and the attacks of autograder/hostile/observed.toml."""

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import time

import pytest

from autograder.observer import build
from autograder.observer.device_code import library_entries
from autograder.observer.records import Pipe, parse
from autograder.observer.session import Observed, Observer, observe_group, observed_case
from autograder.observer.verdict import OwnKernels, kernels_problem
from autograder.observer.window import EXPLICIT, LEGACY, observe

OWN = "_Z23layernorm_forward_warpIfEvPKT_S2_S2_PS0_PfS4_lld"
TORCH_FILL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
TORCH_REDUCE = "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfEEEEvT2_"
DEMANGLED = {
    OWN: "void layernorm_forward_warp<float>(float const*, float const*, float const*, float*, float*, float*, "
    "long, long, double)",
    TORCH_FILL: "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
    TORCH_REDUCE: "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >(at::native::ReduceOp<float>)",
}
MARKERS = (1_000_001, 1_000_003)


# ---- records as the library writes them ----


def _line(**record) -> bytes:
    return json.dumps(record).encode() + b"\n"


def _kernel(name: str, start: int, end: int, corr: int) -> bytes:
    demangled = DEMANGLED.get(name, name)
    grid, block = [1, 1, 1], [128, 1, 1]
    return _line(t="kernel", start=start, end=end, device=0, stream=13, corr=corr, grid=grid, block=block, name=name,
                 demangled=demangled)  # fmt: skip


def _launch(corr: int, ts: int, stream_kind: int = EXPLICIT, outer: int = 0, api: str = "runtime") -> bytes:
    return _line(t="launch", api=api, corr=corr, outer=outer, stream_kind=stream_kind, ts=ts, cbid=211)


def _marker(size: int, start: int) -> bytes:
    return _line(t="memcpy", start=start, end=start + 10, device=0, stream=7, corr=1, bytes=size, copy=1)


def _run(*inside: bytes, flushed: bool = True) -> list[bytes]:
    """A child's lines: hello, setup work, the first marker at 1000, `inside`, the second at 9000."""
    hello = _line(t="hello", version=1, cupti=130001, pid=7, ts=1, ok=1)
    setup = _kernel(TORCH_REDUCE, 100, 900, 2)  # before the span: the harness's, not the op's
    lines = [hello, setup, _marker(MARKERS[0], 1000), *inside, _marker(MARKERS[1], 9000)]
    return lines + ([_line(t="flush", ts=9500)] if flushed else [])


def _records(lines: list[bytes], tail: bytes = b""):
    pipe = Pipe()
    os.write(pipe.fd, b"".join(lines) + tail)
    pipe.close_write_end()
    return pipe.reader.result(timeout=5)


def _honest(stream_kind: int = EXPLICIT) -> list[bytes]:
    """Three calls: each a launch of the student's kernel and a fill of PyTorch's."""
    lines = []
    for call in range(3):
        base, corr = 2000 + 2000 * call, 100 + 10 * call
        lines += [_launch(corr, base, stream_kind), _launch(corr + 1, base + 1, outer=corr, api="driver")]
        lines += [_kernel(OWN, base + 100, base + 1100, corr)]
        lines += [_launch(corr + 2, base + 2), _kernel(TORCH_FILL, base + 1100, base + 1200, corr + 2)]
    return lines


def test_records_are_parsed_and_a_line_not_the_librarys_is_named():
    assert parse(b'{"t": "end"}') == {"t": "end"}
    assert "not a record" in parse(b"\xff\xfe garbage")
    assert "no known kind" in parse(b'{"t": "kernel2"}') and "no known kind" in parse(b"[1, 2]")
    assert "valid start" in parse(_kernel(OWN, 5, 6, 1).replace(b'"start": 5', b'"start": -5').strip())
    assert "valid grid" in parse(_kernel(OWN, 5, 6, 1).replace(b"[1, 1, 1]", b"[1, 1]").strip())
    found = _records(_run(*_honest()))
    assert not found.problems and not found.truncated and found.hello["ok"] == 1
    assert len(found.of_kind("kernel")) == 7 and len(found.of_kind("launch")) == 9


def test_a_forged_or_cut_pipe_fails_the_case_and_never_hangs_the_reader():
    forged = _records(_run(*_honest(), b"\x00\x01 not json\n"))
    assert forged.problems and "did not write" in observe(forged, MARKERS, 3)
    cut = _records(_run(*_honest()), tail=b'{"t": "kernel", "start": 1')
    assert cut.truncated and not cut.problems  # the records before the cut are whole
    long_line = _records([b"x" * (70 << 10)])
    assert long_line.problems and "longer than" in long_line.problems[0]
    start = time.monotonic()
    never_closed = Pipe()  # a writer that neither writes nor closes: the wait ends at its timeout
    assert never_closed.reader.result(timeout=0.5).truncated and time.monotonic() - start < 3
    never_closed.close_write_end()


def test_the_span_between_the_markers_gives_the_calls_kernels_and_busy_time():
    seen = observe(_records(_run(*_honest())), MARKERS, 3)
    assert [k.name for k in seen.kernels] == [OWN, TORCH_FILL] * 3  # not the harness's reduce before it
    assert seen.busy_ns == 3 * 1100 and seen.busy_ms_per_call == pytest.approx(0.0011)
    assert seen.unmatched_launches == 0 and all(k.stream_kind == EXPLICIT for k in seen.kernels)
    twice = _run(*_honest(), _marker(MARKERS[0], 8000))
    assert "seen 2 times" in observe(_records(twice), MARKERS, 3)
    assert "seen 0 times" in observe(_records(_run(*_honest())), (5, MARKERS[1]), 3)
    assert "never arrived" in observe(_records(_run(*_honest(), flushed=False)), MARKERS, 3)
    dropped = _run(*_honest(), _line(t="dropped", n=4))
    assert "dropped" in observe(_records(dropped), MARKERS, 3)


def test_the_verdict_wants_own_kernels_on_a_stream_and_little_foreign_time():
    own = OwnKernels(frozenset({OWN}), frozenset())
    assert kernels_problem(observe(_records(_run(*_honest())), MARKERS, 3), own) == ""
    legacy = kernels_problem(observe(_records(_run(*_honest(LEGACY))), MARKERS, 3), own)
    assert "legacy default stream" in legacy and "layernorm_forward_warp" in legacy
    nobody = OwnKernels(frozenset({"_Z5otherv"}), frozenset({"other"}))
    assert "no kernel of your own ran" in kernels_problem(observe(_records(_run(*_honest())), MARKERS, 3), nobody)
    # PyTorch's reduction beside the student's kernel: a little is help, most of the time is not
    helped = _honest() + [_launch(900, 7000), _kernel(TORCH_REDUCE, 7000, 7200, 900)]
    assert kernels_problem(observe(_records(_run(*helped)), MARKERS, 3), own) == ""
    handed = _honest() + [_launch(900, 7000), _kernel(TORCH_REDUCE, 7000, 8900, 900)]
    problem = kernels_problem(observe(_records(_run(*handed)), MARKERS, 3), own)
    assert "not of your own" in problem and "reduce_kernel" in problem
    # a name in PyTorch's namespaces is PyTorch's, even where the submission compiled one so named
    assert "no kernel of your own" in kernels_problem(
        observe(_records(_run(_launch(5, 2000), _kernel(TORCH_REDUCE, 2000, 3000, 5))), MARKERS, 3),
        OwnKernels(frozenset({TORCH_REDUCE}), frozenset()),
    )
    lost = _honest() + [_launch(901, 7000)]  # a launch whose kernel never reached the pipe
    assert "interfered with" in kernels_problem(observe(_records(_run(*lost)), MARKERS, 3), own)
    triton = OwnKernels(frozenset(), frozenset({"_rms_kernel"}))
    old_triton = _run(_launch(5, 2000, api="driver"), _kernel("_rms_kernel_0d1d2de", 2000, 3000, 5))
    assert kernels_problem(observe(_records(old_triton), MARKERS, 3), triton) == ""


def test_a_perf_verdict_takes_the_observed_busy_time_and_says_when_there_is_none():
    """The child reports 0.05 ms of busy time; the observer 1.1 us a call: the observer decides."""
    honest = observe(_records(_run(*_honest())), MARKERS, 3)
    assert _verdict_with(0.002, Observed({}, honest)).passed  # the child's 0.05 ms would have failed it
    slow = _verdict_with(0.0005, Observed({}, honest))
    assert not slow.passed and "ran faster than its kernels, observed from outside the test process" in slow.message
    assert "0.001 ms of GPU work per call" in slow.message and slow.measurements["observed_busy_ms"] == 0.0011
    assert slow.measurements["kernels_busy_ms"] == 0.05
    legacy = _verdict_with(1.0, Observed({}, observe(_records(_run(*_honest(LEGACY))), MARKERS, 3)))
    assert not legacy.passed and "legacy default stream" in legacy.message
    none = _verdict_with(0.06, Observed("x", unavailable="no CUPTI here"))
    assert none.passed and "not observed from outside the test process: no CUPTI here" in none.message
    assert not _verdict_with(0.03, Observed("x", unavailable="no CUPTI here")).passed  # the child's check, as before
    problem = _verdict_with(0.06, Observed("x", problem="its marker copy was seen 2 times"))
    assert not problem.passed and "seen 2 times" in problem.message
    wrong = _verdict_with(0.06, Observed({"outputs": []}, honest))
    assert not wrong.passed and "did not answer right" in wrong.message


@functools.cache
def _small_perf_case():
    """day05's perf case on 64 rows of 7 (judged in a blink), its inputs and right outputs."""
    from course.cases import make_input_sets
    from course.spec import units

    spec = units.load("day05_layernorm_performance").tests()
    case = next(c for c in spec.CASES if c.name == "cuda_perf_fp32_d7")
    case = dataclasses.replace(case, params={**case.params, "shape": (64, 7)})
    inputs = make_input_sets(spec, case, seed=1)[:1]
    op = spec.OPS["forward"]
    outputs = tuple(t.to(dtype) for t, dtype in zip(op.reference(inputs[0]), op.dtypes(inputs[0])))
    return spec, case, inputs, outputs


def _verdict_with(timed_ms: float, observed: Observed):
    """A perf verdict that earned points, checked at the timed size: the child's profile saw the
    student's kernel keep the GPU busy 0.05 ms and both calls answered right; `observed`'s
    outcome, where it is {}, is those right outputs too."""
    from autograder.timed_kernels import own_code_at_timed_size
    from course.judge import Verdict

    spec, case, inputs, outputs = _small_perf_case()
    run = {"outputs": [outputs, outputs], "output_devices": [("cuda:0",) * 3] * 2}
    ops = ["aten::empty_like"]  # every honest call allocates its outputs
    profiled = {**run, "ops": ops, "ops_seen": ops, "kernels": [DEMANGLED[OWN]], "busy_ms": 0.05}
    outcome = {"timing": {"median_ms": timed_ms, "spread": 0.01, "reps": 50}, "own_kernel": profiled}
    if observed.outcome == {}:
        observed = dataclasses.replace(observed, outcome=run)
    earned = Verdict(True, "1.00x the reference", 1.0, {"ratio": 1.0})
    own = OwnKernels(frozenset({OWN}), frozenset())
    return own_code_at_timed_size(
        spec, case, inputs, outcome, earned, frozenset({"layernorm_forward_warp"}), observed, own
    )


def test_a_child_whose_observer_never_started_is_judged_as_before(tmp_path):
    assert "did not start" in observed_case({"outputs": []}, [_records([])], MARKERS).unavailable
    refused = [
        _line(t="hello", version=1, cupti=1, pid=1, ts=1, ok=0),
        _line(t="error", what="cuptiSubscribe", code=39),
    ]
    assert "could not enable CUPTI (cuptiSubscribe" in observed_case({}, [_records(refused)], MARKERS).unavailable
    crashed = observed_case("the test process was killed by SIGSEGV during this test", [_records(_run())], MARKERS)
    assert not crashed.unavailable and "SIGSEGV" in crashed.problem
    nowhere = Observer({"CUDA_HOME": str(tmp_path / "none"), "PATH": ""})
    nowhere_env = {"GRADER_OBSERVER_CACHE": str(tmp_path / "cache")}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build, "_python_package_dirs", lambda: [])
        for name, value in nowhere_env.items():
            patch.setenv(name, value)
        assert not nowhere.built and "no CUPTI" in nowhere.unavailable
        found = observe_group({}, nowhere, "cuda_perf", "cuda", [(3, None)], {})
    assert found[3].unavailable.startswith("no observer on this machine: no CUPTI")


# ---- the library ----


def test_the_library_builds_with_cupti_and_exports_its_entry_points(tmp_path, monkeypatch):
    env = {"CUDA_HOME": os.environ.get("CUDA_HOME", "/usr/local/cuda")}
    if isinstance(build.find_cupti(env), str) or not shutil.which("g++") or not shutil.which("nm"):
        pytest.skip("no CUPTI, g++ or nm here")
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    path = build.library(env)
    exported = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True).stdout.split()
    assert "InitializeInjection" in exported and "course_observer_flush" in exported
    assert os.path.dirname(os.path.dirname(path)) == str(tmp_path / "cache")
    start = time.monotonic()
    assert build.library(env) == path and time.monotonic() - start < 5  # cached


def test_the_kernels_of_a_librarys_device_code_are_read_by_their_mangled_names(tmp_path):
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("no nvcc here")
    source = tmp_path / "k.cu"
    source.write_text(
        "namespace ns { template <typename T> __global__ void scale(T* x) { x[0] *= 2; } }\n"
        'extern "C" __global__ void plain(float* x) { x[0] = 1; }\n'
        "void launch(float* x) { ns::scale<float><<<1, 1>>>(x); plain<<<1, 1>>>(x); }\n"
    )
    library = tmp_path / "k.so"
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-arch=sm_75", "-o", library, source], check=True)
    assert library_entries(str(library)) == ({"_ZN2ns5scaleIfEEvPT_", "plain"}, 0)
    own = OwnKernels.of_files([str(library), str(tmp_path / "missing.so")])
    assert own.mangled == {"_ZN2ns5scaleIfEEvPT_", "plain"} and own.identifiers == frozenset()


def test_a_sandboxed_run_writes_to_the_pipe_it_is_handed(tmp_path):
    """The pipe's write end reaches the child through the sandbox, under its number in
    COURSE_OBSERVER_FD, and no other of the grader's descriptors does."""
    from autograder.sandbox import Limits, Sandbox, python_command

    box = Sandbox.open("auto", str(tmp_path))
    try:
        folder = box.folder(str(tmp_path), "run_")
        pipe = Pipe()
        stray_read, stray_write = os.pipe()
        os.set_inheritable(stray_write, True)
        probe = (
            "import os, json; fd = int(os.environ['COURSE_OBSERVER_FD']); "
            "os.write(fd, json.dumps({'t': 'flush', 'ts': 5}).encode() + b'\\n'); "
            f"open('stray', 'w').write(str(os.path.exists('/proc/self/fd/{stray_write}')))"
        )
        run = box.start(
            python_command("-c", probe),
            writable=[folder],
            cwd=folder,
            env={**os.environ, "COURSE_OBSERVER_FD": str(pipe.fd)},
            limits=Limits(cpu_seconds=60),
            pass_fds=(pipe.fd,),
        )
        pipe.close_write_end()
        assert run.wait(60) == 0, run.stderr()
        run.kill()
        os.close(stray_write)
        os.close(stray_read)
        assert pipe.reader.result(timeout=10).records == [{"t": "flush", "ts": 5}]
        assert open(os.path.join(folder, "stray")).read() == "False"
    finally:
        box.close()


# ---- on a GPU ----


def _graded(tmp_path, unit, submission: str, tests: tuple[str, ...]):
    from autograder.grade import grade
    from autograder.grade_options import GradeOptions

    return grade(submission, unit, GradeOptions(seed=7, work=str(tmp_path / "work"), tests=tests))


@pytest.mark.gpu
@pytest.mark.timed
@pytest.mark.autograder
def test_a_reference_perf_case_is_observed_with_its_own_kernels_and_busy_time(tmp_path):
    from course.spec import units

    unit = units.load("day05_layernorm_performance")
    unit.write("solution", str(tmp_path / "submission"))
    tests = ("cuda_warp_per_row_*", "cuda_vectorized_*", "cuda_perf_fp32_d1024")
    result = _graded(tmp_path, unit, str(tmp_path / "submission"), tests)
    perf = next(t for t in result.tests if t.name == "cuda_perf_fp32_d1024")
    assert perf.passed and "not observed" not in perf.output, perf.output
    measured = result.perf["cuda_perf_fp32_d1024"]
    assert 0 < measured["observed_busy_ms"] <= measured["ours_ms"] / 0.75, measured
    assert result.timings.get("observed_s", 0) > 0


@pytest.mark.gpu
@pytest.mark.timed
@pytest.mark.autograder
@pytest.mark.parametrize("name", ["fakes_profiler_timings", "legacy_stream_when_timed"])
def test_an_attack_on_what_the_process_reports_loses_its_perf_points(name, tmp_path):
    from course.spec import mutants, units

    path = os.path.join(os.path.dirname(build.__file__), "..", "hostile", "observed.toml")
    with open(path, "rb") as handle:
        import tomllib

        unit = units.load(tomllib.load(handle)["unit"])
    mutant = mutants.load_file(path)[name]
    mutants.write(unit, mutant, str(tmp_path / "submission"))
    result = _graded(tmp_path, unit, str(tmp_path / "submission"), mutant.tests)
    failed = {t.name for t in result.tests if not t.passed and not t.not_run}
    table = "\n".join(f"{t.name}: {t.output[:400]}" for t in result.tests)
    assert failed == set(mutant.loses), table
    assert all(mutant.says in t.output for t in result.tests if t.name in failed), table


def test_the_gpu_fixtures_name_cases_of_their_unit(tmp_path):
    import tomllib

    from course.spec import mutants, units

    path = os.path.join(os.path.dirname(build.__file__), "..", "hostile", "observed.toml")
    with open(path, "rb") as handle:
        unit = units.load(tomllib.load(handle)["unit"])
    names = {c.name for c in unit.tests(hidden=True).CASES}
    for mutant in mutants.load_file(path).values():
        assert set(mutant.loses) <= names and mutant.says
        mutants.write(unit, mutant, str(tmp_path / mutant.name))  # its edits apply
