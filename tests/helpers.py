"""Building a unit's rendered sources once per test session, loading its suites, and compiling
Triton kernels for a GPU that is not here."""

import fcntl
import json
import os
import re
import subprocess
import sys

from course.loading import build_and_load
from course.spec import units

_built = {}


def built_unit(name: str, kind: str, root: str):
    """(what the tests call, source dir) for unit `name` rendered as 'solution' or 'template',
    built once per session: the first xdist worker to ask writes and builds it under `root`
    (shared by the workers), the others wait for it and load that build."""
    key = (name, kind)
    if key not in _built:
        unit = units.load(name)
        folder = os.path.join(root, name, kind)
        os.makedirs(folder, exist_ok=True)
        with open(folder + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            source_dir = os.path.join(folder, "src")
            if not os.path.isdir(source_dir):  # written once: new files would make ninja build again
                unit.write(kind, source_dir + ".partial")
                os.rename(source_dir + ".partial", source_dir)
            module, _ = build_and_load(unit.plan(), source_dir, os.path.join(folder, "build"))
        _built[key] = module, source_dir
    return _built[key]


def skip_without_gpu_if_gpu_only(unit) -> None:
    """Skip where there is no GPU and every case of the unit needs one (Triton units): there is
    nothing of theirs to run on the CPU."""
    import pytest
    import torch

    if not torch.cuda.is_available() and all(case.device != "cpu" for case in unit.tests().CASES):
        pytest.skip(f"every case of {unit.name} runs on a GPU")


def timed_marks(cases) -> list:
    """The `timed` marker where any of the cases is graded by its timings on a GPU (a perf case
    there): such a test runs alone (scripts/gpu_check.sh), as other work on the GPU would skew
    its ratios."""
    import pytest

    timed = any(case.kind == "perf" and case.device.startswith("cuda") for case in cases)
    return [pytest.mark.timed] if timed else []


def explain(result) -> str:
    """A grading's table, and the end of its build's log where the build failed: what a
    failure in CI needs to be understood without a rerun."""
    from autograder import report

    build = next((t for t in result.tests if t.name == "build" and not t.passed), None)
    tail = "\n".join((getattr(build, "log", "") or "").splitlines()[-60:]) if build else ""
    return report.table(result) + (f"\n--- the build's log, its end ---\n{tail}" if tail else "")


def load_spec(name: str, public_only: bool = False):
    return units.load(name).tests(hidden=not public_only)


def cpu_path_has_todo(unit) -> bool:
    """Whether the unit's template leaves a C++ TODO on its CPU path: a COURSE_TODO or
    COURSE_TODO_CPU line in a .cpp file (one in a .cu or .cuh file blocks only the CUDA path).
    Python TODOs block only the cases that call the function they stand in."""
    return any(
        re.search(r"^COURSE_TODO(_CPU)?\(", unit.template(file), re.MULTILINE)
        for file in unit.files
        if file.endswith(".cpp")
    )


def template_todos(unit, kind: str = "template") -> list:
    """The functions left unwritten in the unit rendered as `kind` (course/todos.py)."""
    from course.todos import parse, todo_lines

    text = getattr(unit, kind)
    return parse("\n".join(line for file in unit.files for line in todo_lines(file, text(file))))


def waits_in_template(unit, spec, case) -> bool:
    """Whether the template keeps `case` from passing: a function its op runs is unwritten
    (the suite's FUNCTIONS_RUN table), or, for a suite without one, a C++ TODO on its path."""
    from course.todos import functions_needed, waiting_on

    if hasattr(spec, "FUNCTIONS_RUN"):
        return bool(waiting_on(functions_needed(spec, case), template_todos(unit)))
    return case.device != "cpu" or cpu_path_has_todo(unit)


def sample_class_problems(unit, out: str, entry: str, names: list[str], lost: set[str]) -> list[str]:
    """autograder.sample_class.check's problems with one grading, OUT/results/ENTRY, that
    failed the tests `lost` of `names` and passed the rest."""
    from autograder import sample_class

    folder = os.path.join(out, "results", entry)
    os.makedirs(folder, exist_ok=True)
    tests = [{"name": n, "status": "failed" if n in lost else "passed", "output": ""} for n in names]
    with open(os.path.join(folder, "results.json"), "w", encoding="utf-8") as handle:
        json.dump({"tests": tests}, handle)
    return sample_class.check(unit, out)


def turing_dtype(declared: str) -> str:
    """The Triton dtype ("bf16", "fp16", "fp32") a case declared `declared` runs in on a T4
    (sm_75) with the Triton installed here (course/dtypes.py)."""
    import torch

    from course.dtypes import Toolchain, triton_float_dtype, triton_version

    if declared != "bf16":
        return declared
    chosen = triton_float_dtype(Toolchain((7, 5), triton_version())).dtype
    return {torch.bfloat16: "bf16", torch.float16: "fp16"}[chosen]


def triton_compile(folder: str, kernels: dict, arch: int) -> dict:
    """Compile each of `kernels`, {(module, kernel): (signature, constexprs)} of modules in
    `folder`, for sm_`arch` with Triton, no GPU needed, all in one process of its own (Triton's
    import costs more than most compiles): {(module, kernel): the cubin's size, or the error}."""
    jobs = [[module, kernel, signature, constexprs] for (module, kernel), (signature, constexprs) in kernels.items()]
    code = f"""
import importlib, inspect, json, sys, traceback
sys.path.insert(0, {str(folder)!r})
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
named = "constexprs" if "constexprs" in inspect.signature(ASTSource).parameters else "constants"  # Triton < 3.3
sizes = []
for module, kernel, signature, constexprs in {jobs!r}:
    try:
        fn = getattr(importlib.import_module(module), kernel)
        source = ASTSource(fn=fn, signature=signature, **{{named: constexprs}})
        sizes.append(len(triton.compile(source, target=GPUTarget("cuda", {arch}, 32)).asm["cubin"]))
    except Exception:
        sizes.append(traceback.format_exc()[-3000:])
print(json.dumps(sizes))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        return {key: result.stderr[-3000:] for key in kernels}
    return dict(zip(kernels, json.loads(result.stdout.splitlines()[-1])))


def with_fresh_call_data(case, result: dict) -> dict:
    """`result`, a forged honest one, with what a case called last on new buffers also returns
    (course.cases.Case.called_fresh): the first call's outputs unchanged, every tensor apart."""
    if not case.called_fresh or len(result["outputs"]) < 2:
        return result
    apart = {"first": [[64, 128]], "last": [[256, 512]], "first_inputs": [[0, 0]], "last_inputs": [[0, 0]]}
    return {**result, "first_after": result["outputs"][0], "memory": apart}
