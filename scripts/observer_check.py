"""On a GPU machine: the observer end to end, each step printing what it needs when it fails.

    python3 scripts/observer_check.py [--skip-pytest]

1. build the library (autograder/observer/build.py): the CUPTI found, the compile command;
2. a bare child under it (no grader): a kernel on a side stream, one on the legacy stream, and
   the records the pipe brought back, raw: whether CUPTI gives what the verdicts assume;
3. grade one perf case of day05 and one of day09 (its Triton autograd case: PyTorch sums its
   partials) with the observer: the kernels it saw, the busy time per call against the child's
   own report and the timed median, and what the observed child cost the grading;
4. the observer's tests, GPU ones included (tests/test_observer.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

CASES = {
    "day05_layernorm_performance": ("cuda_warp_per_row_*", "cuda_vectorized_*", "cuda_perf_fp32_d1024"),
    "day09_rmsnorm_int8": ("triton_forward_*", "triton_autograd_*", "triton_perf_autograd_bf16"),
}
BARE_CHILD = r"""
import ctypes, os, torch
torch.zeros(1, device="cuda")
flush = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"]).course_observer_flush
x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
torch.zeros(1000001, dtype=torch.uint8).to("cuda"); torch.cuda.synchronize()
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    y = x * 2            # PyTorch's kernel on the side stream
torch.cuda.synchronize()
z = x * 3                # on the legacy default stream (PyTorch's default)
torch.cuda.synchronize()
torch.zeros(1000003, dtype=torch.uint8).to("cuda"); torch.cuda.synchronize()
flush()
print("bare child done", float(y[0]), float(z[0]))
"""


def step(title: str) -> None:
    print(f"\n================ {title} ================", flush=True)


def build_library() -> str:
    from autograder.machine import child_env
    from autograder.observer import build

    env = child_env("9.0")
    cupti = build.find_cupti(env)
    print("CUPTI:", cupti)
    if isinstance(cupti, str):
        raise SystemExit("no CUPTI found: the observer is unavailable here, gradings judge as before")
    print("compile:", " ".join(build.compile_command(cupti, build.find_compiler(env) or "g++", "OUT.so")))
    path = build.library(env)
    exports = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True).stdout
    print(
        "library:",
        path,
        "| exports:",
        [w for w in exports.split() if w in ("InitializeInjection", "course_observer_flush")],
    )
    return path


def bare_child(library: str) -> None:
    from autograder.observer.records import Pipe
    from autograder.observer.window import observe

    pipe = Pipe()
    env = {**os.environ, "CUDA_INJECTION64_PATH": library, "COURSE_OBSERVER_FD": str(pipe.fd)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", BARE_CHILD], env=env, pass_fds=(pipe.fd,), capture_output=True, text=True, timeout=300
    )
    pipe.close_write_end()
    records = pipe.reader.result(timeout=10)
    print(f"exit {done.returncode} after {time.perf_counter() - start:.1f} s; stdout: {done.stdout.strip()}")
    if done.returncode:
        print("stderr:", done.stderr[-3000:])
    print(f"records: {len(records.records)}, problems: {records.problems[:3]}, truncated: {records.truncated}")
    for record in records.records:
        if (
            record["t"] in ("hello", "launch", "kernel", "flush", "end", "error", "dropped")
            or record.get("bytes", 0) > 999_999
        ):
            shown = {k: v for k, v in record.items() if k != "demangled"}
            print("  ", json.dumps(shown)[:260])
    seen = observe(records, (1000001, 1000003), 1)
    if isinstance(seen, str):
        print("OBSERVE FAILED:", seen)
        return
    print(f"span: {len(seen.kernels)} kernels, busy {seen.busy_ns} ns, unmatched launches {seen.unmatched_launches}")
    for kernel in seen.kernels:
        print(f"   stream {kernel.stream} stream_kind {kernel.stream_kind} {kernel.demangled[:100]}")
    print("   expected: x * 2 with stream_kind 0 (a stream), then x * 3 with stream_kind 1 (the legacy stream)")


def graded(unit_name: str, tests: tuple[str, ...]) -> None:
    import autograder.stages.run as run_stage
    from autograder.grade import grade
    from autograder.grade_options import GradeOptions
    from course.spec import units

    seen: dict = {}
    original = run_stage.observe_group

    def keeping(*args, **kwargs):
        found = original(*args, **kwargs)
        seen.update(found)
        return found

    run_stage.observe_group = keeping
    unit = units.load(unit_name)
    with tempfile.TemporaryDirectory(prefix="observer_check_") as work:
        unit.write("solution", os.path.join(work, "submission"))
        start = time.perf_counter()
        result = grade(
            os.path.join(work, "submission"), unit, GradeOptions(seed=7, work=os.path.join(work, "w"), tests=tests)
        )
        wall = time.perf_counter() - start
    run_stage.observe_group = original
    for test in result.tests:
        print(f"{test.name}: {'passed' if test.passed else 'FAILED'} {test.score}/{test.max_score}")
        if not test.passed or "perf" in test.name:
            print("   " + test.output.replace("\n", "\n   ")[:3000])
    spec = unit.tests(hidden=True)
    for index, observed in seen.items():
        name = spec.CASES[index].name
        verdict = next((t for t in result.tests if t.name == name), None)
        print(f"-- {name}: unavailable={observed.unavailable!r} problem={observed.problem!r}")
        if observed.observation is not None:
            o = observed.observation
            by_kernel: dict = {}
            for k in o.kernels:
                entry = by_kernel.setdefault((k.demangled[:110], k.stream_kind), [0, 0.0])
                entry[0] += 1
                entry[1] += k.ms
            for (kernel, kind), (count, ms) in sorted(by_kernel.items(), key=lambda item: -item[1][1]):
                print(f"   {count}x {ms:.3f} ms stream_kind={kind} {kernel}")
            print(f"   transfers: {len(o.transfers)}, unmatched launches: {o.unmatched_launches}")
            print(f"   observed busy per call: {o.busy_ms_per_call:.4f} ms over {o.calls} calls")
        if verdict is not None:
            m = result.perf.get(name, {})
            print(
                f"   timed median {m.get('ours_ms')} ms; busy per call: observed {m.get('observed_busy_ms')} ms, "
                f"the child's profiler {m.get('kernels_busy_ms')} ms; ratio to the reference {m.get('ratio')}"
            )
    timings = result.timings
    print(
        f"grading wall {wall:.1f} s; observed child (build, start, calls): {timings.get('observed_s', 0):.1f} s; "
        f"runs {timings.get('runs_s', 0):.1f} s; baselines {timings.get('baselines_s', 0):.1f} s; "
        f"observed cases {len(seen)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-pytest", action="store_true")
    args = parser.parse_args()
    failures = []
    step("1. build the observer")
    try:
        library = build_library()
    except BaseException as error:  # SystemExit included: the rest cannot run
        traceback.print_exc()
        print("BUILD FAILED:", error)
        return 1
    step("2. a bare child under the observer")
    try:
        bare_child(library)
    except Exception:
        traceback.print_exc()
        failures.append("bare child")
    for unit, tests in CASES.items():
        step(f"3. {unit} graded with the observer ({tests[-1]})")
        try:
            graded(unit, tests)
        except Exception:
            traceback.print_exc()
            failures.append(unit)
    if not args.skip_pytest:
        step("4. tests/test_observer.py")
        code = subprocess.run(
            [sys.executable, "-m", "pytest", "-v", "-ra", "-p", "no:cacheprovider", "tests/test_observer.py"], cwd=REPO
        ).returncode
        if code:
            failures.append("pytest")
    step("summary")
    print("failed steps:", failures or "none")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
