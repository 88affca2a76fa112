"""A unit's small CUDA cases under compute-sanitizer: memory errors (memcheck), races on
shared memory (racecheck), reads of device memory never written (initcheck).

    run_sanitizer("memcheck", plan, source_dir, build_dir, suites_root) -> SanitizerReport

builds the unit's sources here, then runs

    compute-sanitizer --tool memcheck python -m course.sanitize PLAN SOURCE_DIR LIBRARY SUITES_ROOT hidden

whose process loads the build and calls the op on every small CUDA values case of the suite
(the hidden one; a notebook's, which has no other, the public one). PyTorch's caching allocator is off there: each tensor is then an allocation of its own,
so a write one element past a tensor's end is past the allocation, where memcheck sees it (a
cached block would hide it inside the block's slack). Under initcheck new tensors are also left
as CUDA hands them out, not filled with NaN (course/harness.py, empty_is_nan): the fill writes
every byte, and initcheck would see no memory as unwritten.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

TOOLS = ("memcheck", "racecheck", "initcheck")
SANITIZER = "sanitizer"  # the kind of a graded case that runs the small CUDA cases under a tool
SLOWDOWN = 5.0  # how much longer a case may take under a tool than its own time limit
MAX_ELEMENTS = 1 << 16  # a sanitized kernel runs 10-100x slower: the small cases are enough
ERROR_EXIT = 86
_SUMMARY = re.compile(r"(ERROR|RACECHECK) SUMMARY: (\d+) (?:errors?|hazards?)")


@dataclass
class SanitizerReport:
    tool: str
    errors: int  # what the tool counted; 0 when clean
    output: str  # the tool's report, cut to its first lines

    @property
    def clean(self) -> bool:
        return self.errors == 0


def find_sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    fallback = os.path.join(home, "bin", "compute-sanitizer")
    return found or (fallback if os.path.exists(fallback) else None)


_HINTS = {
    "memcheck": "compute-sanitizer --tool memcheck saw an access outside an allocation: read the kernel, "
    "thread, block and line it names, and check that loop's bounds (day04, 7.3)",
    "racecheck": "compute-sanitizer --tool racecheck saw threads reading shared memory that others write "
    "with no __syncthreads() between: read the two lines it names (day04, 7.4)",
    "initcheck": "compute-sanitizer --tool initcheck saw a read of device memory nothing had written: read "
    "the kernel, thread and line it names, and find who was to write that memory (day04, 7.5)",
}


def tool_env(tool: str) -> dict[str, str]:
    """What the process run under `tool` needs in its environment: the caching allocator off,
    and under initcheck new tensors left unwritten."""
    from course.harness import UNFILLED

    return {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", **({UNFILLED: "1"} if tool == "initcheck" else {})}


def sanitizer_cases(tools=("memcheck", "racecheck"), points: float = 1.0, skip: tuple[str, ...] = ()) -> list:
    """The graded cases a CUDA unit's hidden suite adds: per tool, the suite's small CUDA values
    cases run under it, passed when it reports nothing (the autograder runs them). `skip`:
    fnmatch patterns of cases left out (a torch.compile or a thousand calls, 10-100x slower
    under a tool, that run no kernel the other cases do not)."""
    from course.cases import Case

    return [
        Case(
            f"cuda_{tool}",
            "cuda_sanitizer",
            "cuda",
            points,
            dict(tool=tool, skip=tuple(skip)),
            kind=SANITIZER,
            hint=_HINTS.get(tool, ""),
            timeout=600.0,
        )
        for tool in tools
    ]


def report_lines(output: str, limit: int = 24) -> str:
    """The tool's own lines of a run's output (its report starts each with =========)."""
    return "\n".join([line[:300] for line in output.splitlines() if line.startswith("=========")][:limit])


def small_cuda_cases(spec) -> list:
    """The suite's CUDA values cases of at most MAX_ELEMENTS elements (of their shape), but
    those that profile the op: the profiler and the sanitizer both instrument every kernel."""
    from course.cases import OWN_KERNEL

    return [
        case
        for case in spec.CASES
        if case.kind == "values"
        and case.device.startswith("cuda")
        and case.elements is not None
        and case.elements <= MAX_ELEMENTS
        and OWN_KERNEL not in case.checks
    ]


def run_sanitizer(
    tool: str, plan, source_dir: str, build_dir: str, suites_root: str, *, hidden: bool = True, timeout: float = 600
) -> SanitizerReport:
    """Build `plan` (a jit unit) from source_dir and run its suite's small CUDA cases under
    `tool`: the hidden suite of the units under suites_root, or with hidden False the public one."""
    from course.build import build

    if tool not in TOOLS:
        raise ValueError(f"tool must be one of {', '.join(TOOLS)}, got {tool!r}")
    sanitizer = find_sanitizer()
    if sanitizer is None:
        raise FileNotFoundError("compute-sanitizer was not found on PATH nor in $CUDA_HOME/bin")
    if plan.build != "jit":
        raise ValueError(f"{plan.name}: only units built with the JIT builder are sanitized, not {plan.build!r}")
    built = build(plan, source_dir, build_dir)
    env = {**os.environ, **tool_env(tool)}
    command = [
        sanitizer,
        "--tool",
        tool,
        "--error-exitcode",
        str(ERROR_EXIT),
        "--print-limit",
        "20",
        sys.executable,
        "-m",
        "course.sanitize",
        plan.to_json(),
        source_dir,
        built.library,
        suites_root,
        "hidden" if hidden else "public",
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    output = run.stdout + run.stderr
    counts = [int(count) for _, count in _SUMMARY.findall(output)]
    errors = max(counts) if counts else (1 if run.returncode == ERROR_EXIT else 0)
    if run.returncode not in (0, ERROR_EXIT):  # the cases themselves did not run to their end
        raise RuntimeError(f"the sanitized run exited with {run.returncode}:\n{output[-3000:]}")
    return SanitizerReport(tool, errors, report_lines(output, 60))


def main(argv: list[str]) -> int:
    """In the sanitized process: load the built unit and call its op on each small CUDA case.
    Verdicts are printed for the reader; the sanitizer's report is what counts."""
    from course.build import Built, Plan
    from course.cases import make_input_sets
    from course.harness import execute
    from course.loading import load
    from course.suites import import_suite

    plan_json, source_dir, library, suites_root, which = argv
    plan = Plan.from_json(plan_json)
    module = load(plan, Built(library=library), source_dir)
    spec = import_suite(suites_root, plan.name, hidden=which == "hidden")
    ran = 0
    for case in small_cuda_cases(spec):
        try:
            execute(spec, module, case, make_input_sets(spec, case, seed=0))
            ran += 1
            print(f"ran {case.name}")
        except Exception as error:
            print(f"{case.name}: {type(error).__name__}: {str(error)[:200]}")
    return 0 if ran else 1  # nothing ran: a clean report would mean nothing


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
