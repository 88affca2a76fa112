"""Limits a smaller machine would put on a notebook's kernel (student_path's --t4: Colab's T4
has 2 cores and about 15 GB of GPU memory), set when the kernel starts, before any cell.

    COURSE_KERNEL_CORES       the CPU cores the kernel and every process it starts may use ("0,1")
    COURSE_KERNEL_GPU_MEMORY  the bytes of GPU memory torch's allocator may hold on each GPU

`startup_folder` writes this file, standalone (the kernel of a release's notebook cannot import
the course's checkout), as an IPython startup file: the kernel runs it when IPYTHONDIR points
there. Neither limit can stop a run: one that cannot be set is reported on the kernel's
stderr, and the run goes on; without a GPU the memory limit is left alone.
"""

from __future__ import annotations

import os
import sys

CORES = "COURSE_KERNEL_CORES"
GPU_MEMORY = "COURSE_KERNEL_GPU_MEMORY"


def confine_to_cores(cores: set[int]) -> None:
    """Every thread of this process on `cores` (a kernel has several by the time it runs its
    startup files); threads and processes started later inherit them."""
    for task in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(task), cores)


def memory_fraction(cap: int, total: int) -> float:
    """The share of a GPU's `total` bytes that `cap` bytes are (all of it for a smaller GPU)."""
    return min(1.0, cap / total)


def cap_gpu_memory(cap: int) -> None:
    import torch  # the kernel imports it for the first cell that runs a test anyway

    if not torch.cuda.is_available():
        return
    for device in range(torch.cuda.device_count()):
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(memory_fraction(cap, total), device)


def apply(environ: dict[str, str]) -> None:
    """Set the limits `environ` names; report on stderr the ones that could not be set."""
    steps = []
    if environ.get(CORES):
        steps.append((CORES, lambda: confine_to_cores({int(core) for core in environ[CORES].split(",")})))
    if environ.get(GPU_MEMORY):
        steps.append((GPU_MEMORY, lambda: cap_gpu_memory(int(environ[GPU_MEMORY]))))
    for name, step in steps:
        try:
            step()
        except Exception as error:
            print(f"kernel limits: {name}={environ[name]!r} not set: {error}", file=sys.stderr)


def startup_folder(folder: str) -> str:
    """An IPYTHONDIR in `folder` whose default profile runs this file at kernel start."""
    startup = os.path.join(folder, "profile_default", "startup")
    os.makedirs(startup, exist_ok=True)
    with open(__file__, encoding="utf-8") as handle:
        text = handle.read()
    with open(os.path.join(startup, "00-kernel-limits.py"), "w", encoding="utf-8") as handle:
        handle.write(text + "\n\napply(dict(os.environ))\n")
    return folder
