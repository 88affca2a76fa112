"""What the grading machine offers the grader's children: the GPUs they see and the first one's
memory (asked of a child, so that the grader's own process never creates a CUDA context) and
the environment they run in. A grading asks here, and so does grade-all (autograder/batch.py), which asks once per GPU
and hands each grading its answer."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from typing import NamedTuple

from autograder.sandbox import CPUS

GPU_PROBE_ENV = "GRADER_GPU_PROBE"  # grade-all's answer for the GPUs it hands a grading


class Gpus(NamedTuple):
    """What the children see: the first GPU's capability ('8.0') and memory, and how many GPUs."""

    capability: str | None  # None: no GPU
    count: int
    free_bytes: int | None = None  # the first GPU's memory, free and in all; None where unknown
    total_bytes: int | None = None


def gpu_capability() -> str | None:
    """'8.0' for the first GPU, None without one. Asked once per process and set of visible GPUs."""
    return gpus_of(os.environ.get("CUDA_VISIBLE_DEVICES")).capability


def gpu_count() -> int:
    """How many GPUs the children see (cases on cuda:1 need two)."""
    return gpus_of(os.environ.get("CUDA_VISIBLE_DEVICES")).count


def gpu_free_bytes() -> int | None:
    """The first GPU's free memory as a child saw it, in bytes; None without a GPU."""
    return gpus_of(os.environ.get("CUDA_VISIBLE_DEVICES")).free_bytes


def gpu_probe_env(visible_devices: str) -> dict[str, str]:
    """For a grading on `visible_devices`: what this process found there, so that the grading
    need not start a process of its own to ask (grade-all starts hundreds of gradings)."""
    return {GPU_PROBE_ENV: json.dumps([visible_devices, *gpus_of(visible_devices)])}


@functools.cache
def gpus_of(visible_devices: str | None) -> Gpus:
    """What a child sees with CUDA_VISIBLE_DEVICES set to `visible_devices` (None: as this
    process has it)."""
    try:  # grade-all asked already, for these GPUs
        visible, *answer = json.loads(os.environ.get(GPU_PROBE_ENV, ""))
        if visible == visible_devices:
            return Gpus(answer[0], int(answer[1]), *answer[2:4])
    except (ValueError, TypeError, IndexError):
        pass
    code = (
        "import torch; print('%d.%d %d %d %d' % (*torch.cuda.get_device_capability(), torch.cuda.device_count(), "
        "*torch.cuda.mem_get_info()) if torch.cuda.is_available() else 'none 0')"
    )
    env = dict(os.environ)
    if visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible_devices
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    answer = (probe.stdout.strip().splitlines()[-1:] or ["none 0"])[0].split()
    if len(answer) != 4 or answer[0] == "none":
        return Gpus(None, 0)
    return Gpus(answer[0], *map(int, answer[1:]))


def child_env(capability: str | None) -> dict:
    """The environment of the grader's children (builds, test processes), for a GPU of
    `capability` (None: no GPU): this process's, less the grader's own GRADER_ settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADER_")}
    # Build for this machine's GPU (for sm_75, Colab's T4, without one), and find CUDA
    # where the nvcc on PATH is only a wrapper script.
    env.setdefault("TORCH_CUDA_ARCH_LIST", capability or "7.5")
    if "CUDA_HOME" not in env and os.path.exists("/usr/local/cuda/bin/nvcc"):
        env["CUDA_HOME"] = "/usr/local/cuda"
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.setdefault("MAX_JOBS", str(min(8, CPUS)))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def perf_runs_here(cases, has_gpu: bool) -> bool:
    """Whether any of `cases` is a perf case this machine can run (a GPU one needs a GPU)."""
    return any(case.kind == "perf" and (has_gpu or not case.device.startswith("cuda")) for case in cases)
