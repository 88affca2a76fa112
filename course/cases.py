"""Test cases: what one check of a unit feeds its op and how it is judged.

A unit's spec (autograder/units/<unit>.py) lists its cases and says how to make
their inputs, how to call the op and what the right answer is. The notebooks run
the public cases in-process; the autograder runs all of them, the op in a child
process and the judging in the parent. Both use the same code, so public and
hidden tests never disagree on what is correct.

A "perf" case times the op against the unit's reference solution (the autograder times
it in the same grading, autograder/reference.py) and earns points by the ratio reference
time / student time: full points from params["full_at"] up, none at params["zero_at"] and
below, linear in between; only if the outputs of the timed calls are right. torch's own op
(the spec's `baseline`) is timed too, for the report; where the reference is not at hand (a
notebook), it stands in, its speed divided by params["reference_vs_torch"], the reference's
speed against torch where that was measured. Its `needs` name cases that must pass before
it is timed.
"""

from __future__ import annotations

import fnmatch
import hashlib
import math
from dataclasses import dataclass, field

import torch

# A perf case's thresholds, as shares of the reference's speed: within a tenth of the fastest
# kernel the course could write earns full points; a case may set its own zero_at.
FULL_AT, ZERO_AT = 0.9, 0.45

# Extra checks a values case can ask for (the harness does the work):
POISON = "poison"  # outputs' memory is pre-filled with NaN: every element must be written
SIDE_STREAM = "side_stream"  # run on a non-default stream whose inputs arrive late
ROTATED = "rotated"  # called again on new values in the same buffers: no cached results
INPUTS_UNCHANGED = "inputs_unchanged"
OWN_KERNEL = "own_kernel"  # no PyTorch op but course/own_code.py's, and on a GPU a kernel of the student's own

# A 16-bit values case is judged on several draws of its inputs: a rounding mistake that one
# draw hides (a tie, a lucky cancellation) must not make a grade depend on the seed. Cases
# past DRAWN_ELEMENTS have elements enough to show it in one draw, and cost more to repeat.
DRAWS = 3
DRAWN_ELEMENTS = 1 << 20
_SIXTEEN_BIT = (torch.float16, torch.bfloat16)

# A values case up to this size is called last on new buffers holding new values, while the
# first call's outputs are kept: an op that hands out one buffer again (a static output
# tensor) or returns its input shows there. Larger cases would need their memory twice.
FRESH_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class Case:
    name: str
    group: str  # cases of a group share one child process in the autograder
    device: str = "cpu"
    points: float = 1.0
    params: dict = field(default_factory=dict)  # handed to the spec's make_inputs
    kind: str = "values"  # "values", "error" or "perf"
    checks: tuple[str, ...] = ()
    error_words: tuple[str, ...] = ()  # an "error" case: words its message must contain
    # An "error" case: the op's arguments, the one the others are checked against first; its
    # message names no argument but those of error_words, and that first one after them.
    error_arguments: tuple[str, ...] = ()
    hint: str = ""  # shown when the case fails: what to look at
    timeout: float = 30.0  # seconds for this case in the autograder's child
    needs: tuple[str, ...] = ()  # cases that must pass before this one runs (names or fnmatch patterns)
    triton: bool = False  # the op compiles Triton kernels in the case's dtype (course/dtypes.py)
    note: str = ""  # what the run changed about the case and why (course/dtypes.py), shown with its verdict
    fresh_call: bool = True  # a small values case: called last on new buffers (called_fresh)
    gpu_bytes: int | None = None  # the GPU memory the case needs, where its shape does not say (gpu_memory)

    @property
    def input_sets(self) -> int:
        if self.kind == "perf":  # timed calls rotate over sets, so none is served from cache
            return self.params.get("input_sets", 3)
        if self.kind == "values" and self.drawn_again:
            return DRAWS  # the last draw is the fresh call's where called_fresh
        return 1 + (ROTATED in self.checks) + self.called_fresh

    @property
    def called_fresh(self) -> bool:
        """A values case whose last input set is called on new buffers while the first call's
        outputs are kept: those must still hold their values, and no output may share memory
        with an earlier call's outputs or with its own inputs. (A side-stream case makes its
        own buffers for every set.)"""
        return (
            self.kind == "values"
            and self.fresh_call
            and SIDE_STREAM not in self.checks
            and self.elements is not None
            and self.elements <= FRESH_ELEMENTS
        )

    @property
    def elements(self) -> int | None:
        """The elements of the case's shape; None for a case sized otherwise (day04's overflow
        cases build a tensor past 2^31 elements from no shape)."""
        shape = self.params.get("shape")
        return None if shape is None else math.prod(shape)

    @property
    def gpu_memory(self) -> int:
        """The device memory the case needs, in bytes: gpu_bytes where declared, else its shape in its
        dtype (float32 where it names none) twice, an input and an output of its size; 0 for a
        case sized otherwise that declares nothing."""
        if self.gpu_bytes is not None:
            return self.gpu_bytes
        dtype = self.params.get("dtype", torch.float32)
        return 2 * (self.elements or 0) * dtype.itemsize

    @property
    def drawn_again(self) -> bool:
        """A small 16-bit values case: judged on DRAWS draws of its inputs."""
        return (
            self.params.get("dtype") in _SIXTEEN_BIT and self.elements is not None and self.elements <= DRAWN_ELEMENTS
        )


def generator_for(case: Case, seed: int, index: int = 0) -> torch.Generator:
    """A generator for one case's inputs, from the run's seed and the case's name."""
    digest = hashlib.sha256(f"{seed}:{case.name}:{index}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


def standard_normal(shape, generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """Normal values for an input of `dtype`, drawn in float32 (in float64 for a float64
    input): the input is rounded to its dtype anyway, and a perf case's sets are made several
    times faster (docs/performance.md). The caller rounds them to `dtype`."""
    return torch.randn(shape, generator=generator, dtype=torch.float64 if dtype == torch.float64 else torch.float32)


def make_input_sets(spec, case: Case, seed: int) -> list[dict]:
    """The case's input sets, on the CPU (the parent makes them; the child moves them)."""
    return [spec.make_inputs(case, generator_for(case, seed, index)) for index in range(case.input_sets)]


def needed(case: Case, cases: list[Case]) -> list[str]:
    """The names of the cases `case` needs, its patterns matched against `cases` (the public
    suite's or the whole one's: the same perf case needs what each of them holds)."""
    return [
        other.name
        for other in cases
        if other is not case and any(fnmatch.fnmatchcase(other.name, need) for need in case.needs)
    ]


def check_needs(cases: list[Case]) -> None:
    """A case may only need cases that exist: a misspelt name would cost every student the points."""
    for case in cases:
        unknown = [need for need in case.needs if not any(fnmatch.fnmatchcase(c.name, need) for c in cases)]
        if unknown:
            raise ValueError(f"case {case.name} needs unknown case(s) {', '.join(unknown)}")
