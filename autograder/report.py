"""The grade as Gradescope's results.json and as a table for people.

Perf tests earn a fraction of their points; one counts as "passed" when it earned
any (right outputs, faster than its zero_at ratio), and its score says how much.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile

import torch

from autograder.build_log import BUILD_LOG
from autograder.results import Grade
from course.spec.questions import PENDING


def machine_info() -> dict:
    """GPU, driver and library versions; read with nvidia-smi so no CUDA context is made here."""
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "gpu": "none",
        "driver": None,
    }
    try:
        line = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            .stdout.strip()
            .splitlines()[0]
        )
        info["gpu"], info["driver"] = (part.strip() for part in line.split(",", 1))
    except (OSError, IndexError, subprocess.SubprocessError, ValueError):
        pass
    return info


def results_json(grade: Grade) -> dict:
    tests = [
        {
            "name": test.name,
            "score": test.score,
            "max_score": test.max_score,
            "status": "passed" if test.passed else "failed",
            "output": test.output,
            "visibility": test.visibility,
            "tags": list(test.tags),
            **({"extra_data": {"seconds": round(test.seconds, 2)}} if test.seconds is not None else {}),
            # Gradescope knows only passed and failed: a written answer to grade is not a failure.
            **({"extra_data": {"status": PENDING}} if test.pending else {}),
        }
        for test in grade.tests
    ]
    timings = ", ".join(f"{key} {value:.1f}" for key, value in grade.timings.items())
    return {
        "score": round(sum(test.score for test in grade.tests), 2),
        "execution_time": round(grade.timings.get("total_s", 0.0), 1),
        "output": f"{grade.unit}: {summary(grade)}. {sandbox_line(grade)}. Timings (s): {timings}",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            **machine_info(),
            "unit": grade.unit,
            "seed": grade.seed,
            "timings": grade.timings,
            "answers": grade.answers,
            "perf": grade.perf,
            "sandbox": grade.sandbox,
        },
    }


def sandbox_line(grade: Grade) -> str:
    mode, uid = grade.sandbox.get("mode", "unknown"), grade.sandbox.get("uid")
    if mode == "none":
        return "WARNING: graded WITHOUT a sandbox (--sandbox none): the submission ran as the grader"
    return f"Sandbox: {mode}, " + (f"uid {uid}" if uid is not None else "as the grader's own user")


def summary(grade: Grade) -> str:
    score = round(sum(t.score for t in grade.tests), 2)
    total = sum(t.max_score for t in grade.tests)
    not_run = sum(t.not_run for t in grade.tests)
    return f"{score:g}/{total:g} points" + (f" ({not_run} tests not run)" if not_run else "")


def table(grade: Grade) -> str:
    width = max(len(t.name) for t in grade.tests)
    lines = [f"{'test':<{width}}  points     status   seconds  reason", "-" * (width + 69)]
    for test in grade.tests:
        status = "PENDING" if test.pending else "PASS" if test.passed else ("NOT RUN" if test.not_run else "FAIL")
        # A test scored by fraction (perf) always shows why: its timing line.
        shown = not test.passed or test.fraction is not None
        reason = (test.output.strip().splitlines() or [""])[0][:160] if shown else ""
        points = f"{test.score:g}/{test.max_score:g}"
        seconds = "" if test.seconds is None else f"{test.seconds:.1f}"
        lines.append(f"{test.name:<{width}}  {points:<10} {status:<8} {seconds:>7}  {reason}")
    lines.append(f"{grade.unit}: {summary(grade)}")
    lines.append("timings: " + ", ".join(f"{k}={v:.1f}" for k, v in grade.timings.items()))
    lines.append(sandbox_line(grade))
    return "\n".join(lines)


def write(grade: Grade, out_dir: str) -> str:
    """Write results.json whole or not at all: a new file renamed over the old one. Call it
    once the grading is over (grade() returns after every process it started is gone), into a
    folder no sandbox may write."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "results.json")
    _write_build_log(grade, os.path.join(out_dir, BUILD_LOG))
    handle, temporary = tempfile.mkstemp(prefix=".results.", suffix=".json", dir=out_dir)
    try:
        with os.fdopen(handle, "w") as file:
            json.dump(results_json(grade), file, indent=2)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    return path


def _write_build_log(grade: Grade, path: str) -> None:
    """A failed build's whole log, for the instructor; an earlier grading's is removed."""
    logs = [test.log for test in grade.tests if test.log]
    if logs:
        with open(path, "w", encoding="utf-8") as file:
            file.write("\n".join(logs))
    elif os.path.exists(path):
        os.unlink(path)
