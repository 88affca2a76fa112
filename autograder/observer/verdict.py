"""What an observed case's kernels say, decided in the grader's process: whose kernels ran,
on which streams. (Its busy time is weighed against its timed calls in
autograder/timed_kernels.py, beside the same check on the child's own report.)"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autograder.observer.device_code import library_entries
from autograder.observer.window import LEGACY, PER_THREAD, STREAM_NAMES, Kernel, Observation
from course import kernel_names
from course.kernel_names import plain_file

# At the size it is timed at an op may let PyTorch help, as day09's Triton backward does when it
# sums its partial dweights with torch: kernels that are neither the submission's own nor
# PyTorch's copies and fills may keep the GPU busy for at most this share of the calls' time.
FOREIGN_SHARE = 0.25
_TRITON_SUFFIX = re.compile(r"_\d[0-9a-z]*$")  # older Triton: a kernel's name + its signature's


@dataclass(frozen=True)
class OwnKernels:
    """The kernels a submission's files define, read as data: the mangled names of its libraries'
    device code; and identifiers: its triton.jit functions, and the names its libraries register
    where their device code could not be read (compressed)."""

    mangled: frozenset[str]
    identifiers: frozenset[str]

    @classmethod
    def of_files(cls, paths: list[str]) -> OwnKernels:
        mangled, identifiers = set(), set()
        for path in paths:
            if not plain_file(path):
                continue
            try:
                if path.endswith(".so"):
                    entries, unreadable = library_entries(path)
                    mangled |= entries
                    identifiers |= kernel_names.library_kernels(path) if unreadable else set()
                elif path.endswith(".py"):
                    identifiers |= kernel_names.triton_kernels(path)
            except (OSError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
                continue
        return cls(frozenset(mangled), frozenset(identifiers))

    def owns(self, kernel: Kernel) -> bool:
        if kernel_names.is_torch_kernel(kernel.demangled):
            return False  # a name of PyTorch's namespaces is PyTorch's, whoever compiled one like it
        if kernel.name in self.mangled:
            return True
        plain = kernel_names.identifier(kernel.demangled)
        return plain in self.identifiers or _TRITON_SUFFIX.sub("", kernel.name) in self.identifiers


def _listed(kernels: list[Kernel], limit: int = 4) -> str:
    by_name: dict[str, float] = {}
    for kernel in kernels:
        label = kernel_names.identifier(kernel.demangled) or kernel.name[:80]
        by_name[label] = by_name.get(label, 0.0) + kernel.ms
    ranked = sorted(by_name.items(), key=lambda item: -item[1])
    return ", ".join(f"{name} ({ms:.3f} ms)" for name, ms in ranked[:limit]) + (" ..." if len(ranked) > limit else "")


def kernels_problem(observation: Observation, own: OwnKernels) -> str:
    """'' when the observed calls ran a kernel of the submission's own, launched every kernel on a
    stream (PyTorch's current one) rather than a default stream, and spent at most FOREIGN_SHARE
    of their time in kernels other than their own and PyTorch's copies and fills."""
    if observation.unmatched_launches:
        return (
            f"{observation.unmatched_launches} kernel launch(es) of the observed calls left no record of the "
            "kernel: the observation was interfered with"
        )
    defaulted = [k for k in observation.kernels if k.stream_kind in (LEGACY, PER_THREAD)]
    if defaulted:
        return (
            f"kernels were launched on {STREAM_NAMES[defaulted[0].stream_kind]}, not on PyTorch's current "
            f"stream: {_listed(defaulted)}; launch on at::cuda::getCurrentCUDAStream() (Triton does)"
        )
    own_ran = [k for k in observation.kernels if own.owns(k)]
    if not own_ran:
        return f"no kernel of your own ran (the GPU ran {_listed(list(observation.kernels)) or 'no kernel'})"
    foreign = [
        k for k in observation.kernels if not own.owns(k) and not kernel_names.is_torch_copy_or_fill(k.demangled)
    ]
    foreign_ns = sum(k.end - k.start for k in foreign)
    if foreign_ns > FOREIGN_SHARE * observation.busy_ns:
        return (
            f"kernels not of your own kept the GPU busy for {foreign_ns / max(observation.busy_ns, 1):.0%} of the "
            f"calls' time (at most {FOREIGN_SHARE:.0%} may be): {_listed(foreign)}"
        )
    return ""
