"""What the student path found for each unit: the grader's verdict read from results.json,
its times, and the summary (a line per unit; summary.json and summary.md).

A solved unit must pass every graded test. A perf test passes by earning points at its ratio
on the hardware at hand (the grader marks it passed when its score is above 0). A test the
grader did not run for what this machine lacks (its case's GPU, or a tool "not on the
grading machine") is counted as not run, not as failed; a written answer, graded by hand, is
left out.
"""

from __future__ import annotations

import json
import os
import platform
import re
from collections import Counter
from dataclasses import asdict, dataclass, field

WRITTEN_TAGS = {"written", "manual"}
MACHINE_LACKS = ("is not on the grading machine", "is not installed on the grading machine")


@dataclass
class UnitRun:
    unit: str
    ok: bool = False
    problem: str = ""  # the first step that failed, and why
    notebook_s: float | None = None  # the notebook's run, top to bottom, kernel start included
    build_s: list[float] = field(default_factory=list)  # each "Built <unit> in X s" it printed
    grading_s: float | None = None  # the grading command, start to end
    grading_build_s: float | None = None  # its build, on the grader's clock
    score: float | None = None
    max_score: float | None = None
    passed: int = 0
    not_run: dict[str, int] = field(default_factory=dict)  # why: how many tests
    failed: list[str] = field(default_factory=list)  # "test: the first line of its output"
    perf: dict[str, float] = field(default_factory=dict)  # perf test: its ratio to the reference


def read_verdict(path: str, result: UnitRun, gpus: int | None = None) -> None:
    """Fill `result` from the grader's results.json at `path`; `gpus`: how many this machine has."""
    with open(path, encoding="utf-8") as handle:
        results = json.load(handle)
    gpus = gpu_count() if gpus is None else gpus
    not_run = Counter()
    for test in results["tests"]:
        output = test.get("output", "")
        if WRITTEN_TAGS & set(test.get("tags", ())):
            continue
        if test["status"] == "passed" and (test["score"] > 0 or test["max_score"] == 0):
            result.passed += 1
        elif output.startswith("not run") and lacking_here(test, gpus):
            not_run[output.partition(":")[2].strip() or output] += 1
        else:
            result.failed.append(f"{test['name']}: {(output.strip().splitlines() or ['failed'])[0]}")
    result.not_run = dict(not_run)
    result.score = results.get("score")
    build = results.get("extra_data", {}).get("timings", {}).get("build_s")
    result.grading_build_s = None if build is None else round(build, 1)
    result.max_score = round(sum(test["max_score"] for test in results["tests"]), 2)
    perf = results.get("extra_data", {}).get("perf", {})
    result.perf = {name: round(entry["ratio"], 3) for name, entry in perf.items() if "ratio" in entry}
    if result.failed:
        result.problem = f"{len(result.failed)} test(s) failed"
    elif not result.passed:
        result.problem = "the grading passed no test"
    result.ok = not result.problem


def lacking_here(test: dict, gpus: int) -> bool:
    """Whether the grader left `test` out for what this machine lacks: the GPU its case runs on
    ("cuda:1" needs two), or a tool it names as not on the grading machine."""
    # The device tag is "cuda" or "cuda:N"; a group's tag may start with "cuda" too (cuda1_package).
    needed = [int(tag.partition(":")[2] or 0) for tag in test.get("tags", ()) if re.fullmatch(r"cuda(:\d+)?", tag)]
    if needed and max(needed) >= gpus:
        return True
    return any(phrase in test.get("output", "") for phrase in MACHINE_LACKS)


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def summary_line(result: UnitRun) -> str:
    builds = ", ".join(f"{seconds:g}" for seconds in result.build_s) + " s" if result.build_s else "none"
    times = (
        f"notebook {_seconds(result.notebook_s)} (builds {builds}), grading {_seconds(result.grading_s)} "
        f"(build {_seconds(result.grading_build_s)})"
    )
    parts = [f"{result.unit}: {'PASS' if result.ok else 'FAIL'}", times]
    if result.score is not None:
        parts.append(
            f"{result.score:g}/{result.max_score:g} points, {result.passed} passed, "
            f"{sum(result.not_run.values())} not run, {len(result.failed)} failed"
        )
    if result.perf:
        parts.append("perf " + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in result.perf.items()))
    if result.problem:
        parts.append(result.problem)
    return "; ".join(parts)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:g} s"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def machine() -> dict:
    """What the times were measured on."""
    import torch

    return {
        "cores": len(os.sched_getaffinity(0)),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def write_summary(out: str, results: list[UnitRun], options: dict) -> None:
    """summary.json (every field) and summary.md (a table) in the folder `out`."""
    os.makedirs(out, exist_ok=True)
    where = machine()
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as handle:
        json.dump(
            {"machine": where, "options": options, "units": [asdict(result) for result in results]}, handle, indent=1
        )
        handle.write("\n")
    columns = (
        "unit",
        "result",
        "notebook s",
        "its builds s",
        "grading s",
        "its build s",
        "points",
        "passed",
        "not run",
        "failed",
    )
    rows = ["| " + " | ".join(columns) + " |", "| --- " * len(columns) + "|"]
    for result in results:
        points = "-" if result.score is None else f"{result.score:g}/{result.max_score:g}"
        rows.append(
            f"| {result.unit} | {'PASS' if result.ok else 'FAIL: ' + result.problem} "
            f"| {_number(result.notebook_s)} | {', '.join(f'{s:g}' for s in result.build_s) or '-'} "
            f"| {_number(result.grading_s)} | {_number(result.grading_build_s)} | {points} | {result.passed} "
            f"| {sum(result.not_run.values())} | {len(result.failed)} |"
        )
    notes = [
        f"- {result.unit}: not run: {reason} ({count})"
        for result in results
        for reason, count in result.not_run.items()
    ]
    notes += [f"- {result.unit}: failed {failure}" for result in results for failure in result.failed]
    header = (
        f"# Student path\n\nOn {where['cores']} cores, GPU {where['gpu']}, torch {where['torch']}, "
        f"load average {where['load_average'][0]}{', T4 settings' if options.get('t4') else ''}.\n\n"
    )
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as handle:
        handle.write(header + "\n".join(rows + ([""] + notes if notes else [])) + "\n")
