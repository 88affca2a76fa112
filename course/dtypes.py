"""Which float dtype Triton can compile on this GPU, and the cases that run in it.

A T4 (sm_75, Colab's GPU) has no bfloat16 arithmetic. Triton 3.2 and older emit bf16
conversion instructions for it anyway, which ptxas refuses ("Feature '.bf16' requires .target
sm_80 or higher"); Triton 3.3 and later convert in software (docs/compatibility.md). A suite declares a
case in the dtype it means, bf16 where a model would use it, and marks the cases whose op
compiles Triton kernels (`Case.triton`). Where this toolchain cannot compile bf16, such a
case runs in fp16 instead, under the same name and for the same points, and its `note` says
why. The notebook's runner asks its own GPU (`Toolchain.here`) and the grader the GPU its
children see (`Toolchain.for_capability`): both decide here, so they cannot decide apart.
A perf case's baselines (torch's op, the reference) are timed on the case's own inputs, so
they run in the dtype the case ran in.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re
from dataclasses import dataclass

import torch

from course.cases import Case

BF16_CAPABILITY = (8, 0)  # sm_80: bf16 conversions in hardware
BF16_TRITON = (3, 3)  # the first Triton that converts bf16 in software below sm_80
_TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton")  # a release's and a nightly's package
_SHORT = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def parse_version(text: str, what: str = "version") -> tuple[int, int]:
    """(major, minor) of '3.2.0', '3.6.0+git1234' or a capability such as '7.5'."""
    found = re.match(r"\s*(\d+)\.(\d+)", str(text))
    if not found:
        raise ValueError(f"{what} must start with MAJOR.MINOR, such as '7.5' or '3.2.0', got {text!r}")
    return int(found.group(1)), int(found.group(2))


def triton_version() -> tuple[int, int] | None:
    """The installed Triton's (major, minor), from its package's metadata: nothing is imported,
    so that the grader's own process need not load Triton. None where it is not installed."""
    for distribution in _TRITON_DISTRIBUTIONS:
        try:
            return parse_version(importlib.metadata.version(distribution), f"{distribution}'s version")
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@dataclass(frozen=True)
class Toolchain:
    """What the choice depends on: the GPU's compute capability (None: no GPU) and Triton's
    version (None: no Triton), each as (major, minor)."""

    capability: tuple[int, int] | None
    triton: tuple[int, int] | None

    @classmethod
    def here(cls) -> Toolchain:
        """This process's first GPU (which makes its CUDA context) and Triton: the notebook's."""
        capability = tuple(torch.cuda.get_device_capability()) if torch.cuda.is_available() else None
        return cls(capability, triton_version())

    @classmethod
    def for_capability(cls, capability: str | None) -> Toolchain:
        """A GPU of `capability` ('7.5', as autograder/machine.py's probe answers; None: no GPU)
        with this interpreter's Triton, which the grader's children run too."""
        return cls(None if capability is None else parse_version(capability, "capability"), triton_version())


@dataclass(frozen=True)
class FloatChoice:
    dtype: torch.dtype  # what a case declared bf16 runs in
    why: str  # "" where bf16 compiles as on any GPU from sm_80


def triton_float_dtype(toolchain: Toolchain) -> FloatChoice:
    """bf16 where the GPU is sm_80 or later or Triton is 3.3 or later; else fp16. Without a GPU
    or without Triton no Triton case runs, and bf16 stays as declared."""
    capability, triton = toolchain.capability, toolchain.triton
    if capability is None or triton is None or capability >= BF16_CAPABILITY:
        return FloatChoice(torch.bfloat16, "")
    gpu, compiler = f"sm_{capability[0]}{capability[1]}", f"Triton {triton[0]}.{triton[1]}"
    if triton >= BF16_TRITON:
        return FloatChoice(torch.bfloat16, f"{gpu} has no bf16 arithmetic; {compiler} converts it in software")
    return FloatChoice(
        torch.float16,
        f"{compiler} cannot compile bf16 for {gpu}; sm_80 and later GPUs can, and so can "
        f"Triton {BF16_TRITON[0]}.{BF16_TRITON[1]} and later",
    )


def for_toolchain(case: Case, toolchain: Toolchain) -> Case:
    """`case` as it runs with `toolchain`: a Triton case declared bf16 in the dtype chosen, same
    name and points, with a note saying what ran and why; any other case as it is."""
    if not case.triton or case.params.get("dtype") != torch.bfloat16:
        return case
    choice = triton_float_dtype(toolchain)
    if not choice.why:
        return case
    note = f"ran in {_SHORT[choice.dtype]}{', not bf16' if choice.dtype != torch.bfloat16 else ''}: {choice.why}"
    if case.kind == "perf":
        note += f"; what it is timed against ran in {_SHORT[choice.dtype]} too"
    return dataclasses.replace(case, params={**case.params, "dtype": choice.dtype}, note=note)


class ToolchainSuite:
    """A unit's suite as it runs with a toolchain: its CASES through `for_toolchain`, everything
    else (inputs, ops, references, baselines) the suite's own."""

    def __init__(self, suite, toolchain: Toolchain):
        self.suite = suite.suite if isinstance(suite, ToolchainSuite) else suite
        self.toolchain = toolchain
        self.CASES = [for_toolchain(case, toolchain) for case in self.suite.CASES]

    def __getattr__(self, name: str):
        if name == "suite":  # not yet set (a copy being made): not the suite's own
            raise AttributeError(name)
        return getattr(self.suite, name)
