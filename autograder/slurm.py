"""Grade a class on a Slurm cluster: `python -m autograder slurm` writes, under OUT/slurm/,

    grade.sbatch   a job array, one task per shard; task K runs `grade-all --shard K/N`
    merge.sbatch   the reports (`merge`), once every task has ended: one core, no GPU, a
                   time limit and options of its own
    submit.sh      submits the array, then the merge depending on it

Slurm places the tasks and gives each its GPUs (CUDA_VISIBLE_DEVICES, which grade-all's
`--gpus all` honours); every task writes OUT/results/<id>/ on a shared filesystem, so the
merge only reads them back. Beyond one machine, nothing but Slurm schedules.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field

from course.written_whole import written_whole

# The folder holding the grader's packages (a checkout, or site-packages): the jobs start there,
# so that a checkout's grader runs without being installed.
PACKAGES_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Job:
    submissions: str
    unit: str
    out: str
    shards: int
    gpus_per_task: int = 1
    cpus_per_task: int = 8
    memory: str = ""  # --mem per task, e.g. 64G; "" asks for the default
    time: str = "04:00:00"
    jobs: int | None = None  # grade-all's gradings at once in a task
    sandbox: str = "auto"
    sbatch_options: list[str] = field(default_factory=list)  # the array's, e.g. --partition=gpu, --account=cs
    python: str = sys.executable
    at_once: int | None = None  # array tasks running at once (--array=...%K); None: Slurm's limit
    setup: list[str] = field(default_factory=list)  # shell lines before the command, e.g. module load cuda
    merge_time: str = "00:30:00"
    merge_options: list[str] = field(default_factory=list)  # the merge's: it runs on one core, no GPU
    merge_args: list[str] = field(default_factory=list)  # the merge command's: --roster, --late-policy, ...


def _header(job: Job, name: str, log: str, time: str, options: list[str]) -> list[str]:
    # sbatch splits a directive at spaces and takes # as a comment: a path is quoted.
    lines = [
        "#!/usr/bin/env bash",
        f"#SBATCH --job-name={name}",
        f"#SBATCH --output={shlex.quote(log)}",
        f"#SBATCH --time={shlex.quote(time)}",
    ]
    lines += [f"#SBATCH {option}" for option in options]
    return lines + ["set -euo pipefail", *job.setup, f"cd {shlex.quote(PACKAGES_FOLDER)}"]


def _array_resources(job: Job) -> list[str]:
    """One task per shard, each one process: current Slurm rejects --gpus-per-task without a
    task count."""
    throttle = f"%{job.at_once}" if job.at_once else ""
    resources = [f"--array=0-{job.shards - 1}{throttle}", "--ntasks=1", f"--cpus-per-task={job.cpus_per_task}"]
    resources += [f"--gpus-per-task={job.gpus_per_task}"] if job.gpus_per_task else []
    return resources + ([f"--mem={shlex.quote(job.memory)}"] if job.memory else [])


def scripts(job: Job) -> dict[str, str]:
    """{file name: text} of the scripts for `job`."""
    logs = os.path.join(job.out, "slurm")
    command = [
        job.python,
        "-m",
        "autograder",
        "grade-all",
        job.submissions,
        "--unit",
        job.unit,
        "--out",
        job.out,
        "--gpus",
        "all" if job.gpus_per_task else "none",
        "--sandbox",
        job.sandbox,
        "--no-reports",
    ]
    command += [] if job.gpus_per_task else ["--cpu-only"]  # tasks without GPUs: a unit's GPU cases not run
    command += ["--jobs", str(job.jobs)] if job.jobs else []
    grade = _header(
        job,
        f"grade-{job.unit}",
        os.path.join(logs, "grade_%A_%a.log"),
        job.time,
        _array_resources(job) + job.sbatch_options,
    )
    # The slots, MAX_JOBS and OMP_NUM_THREADS follow the task's cores, not the node's (grade-all
    # reads the cores it may run on).
    grade += [" ".join(shlex.quote(part) for part in command) + f' --shard "$SLURM_ARRAY_TASK_ID/{job.shards}"']
    # The merge only reads the results back: one core, no GPU, and none of the array's options
    # (a GPU partition or gres would keep it waiting for a GPU it never uses).
    merge = _header(
        job,
        f"merge-{job.unit}",
        os.path.join(logs, "merge_%j.log"),
        job.merge_time,
        ["--ntasks=1", "--cpus-per-task=1", *job.merge_options],
    )
    command = [job.python, "-m", "autograder", "merge", job.out, "--unit", job.unit, *job.merge_args]
    merge += [" ".join(shlex.quote(p) for p in command)]
    submit = [
        "#!/usr/bin/env bash",
        "# Submit the array, then the merge once every task has ended.",
        "set -euo pipefail",
        f"cd {shlex.quote(logs)}",
        "array=$(sbatch --parsable grade.sbatch)",
        'merge=$(sbatch --parsable --dependency="afterany:${array%%;*}" merge.sbatch)',
        'echo "grading: job $array; merge: job $merge"',
    ]
    return {
        name: "\n".join(lines) + "\n"
        for name, lines in (("grade.sbatch", grade), ("merge.sbatch", merge), ("submit.sh", submit))
    }


def write(job: Job) -> str:
    """Write the scripts into OUT/slurm/; return the path of submit.sh."""
    folder = os.path.join(job.out, "slurm")
    os.makedirs(folder, exist_ok=True)
    for name, text in scripts(job).items():
        path = os.path.join(folder, name)
        with written_whole(path) as temporary:
            with open(temporary, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(temporary, 0o755)
    return os.path.join(folder, "submit.sh")
