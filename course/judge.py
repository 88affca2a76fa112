"""Decides pass or fail for one case from what the harness returned.

In the autograder this runs in the parent, which never loads student code; the
reference is computed here, in float64.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from course import hints, kernel_names, own_code
from course.bench import Timing
from course.cases import INPUTS_UNCHANGED, OWN_KERNEL, ROTATED, Case
from course.ops import op_for
from course.todos import refusal

PATTERN = "  what it looks like: "  # a line from course.hints or the op's diagnosis, under the mismatch


@dataclass
class Verdict:
    passed: bool
    message: str = ""
    fraction: float | None = None  # of the case's points; None: all if passed, else none
    measurements: dict = field(default_factory=dict)  # a perf case's timings, for the report


def needs_not_met(case: Case, unmet: list[str]) -> Verdict:
    """The verdict of a case skipped because cases it needs did not pass."""
    return Verdict(False, f"not {'timed' if case.kind == 'perf' else 'tested'}: {', '.join(unmet)} must pass first")


def judge_grader_check(case: Case, problem: str) -> Verdict:
    """The verdict of a case whose op the grader checks itself (course.ops.Op.checked_by_grader):
    `problem` is what the check found wrong, "" for nothing."""
    return Verdict(False, "\n".join(_with_hint([problem], case))) if problem else Verdict(True)


def perf_fraction(ratio: float, full_at: float, zero_at: float) -> float:
    """The share of a perf case's points for running at `ratio` x the reference's speed (its
    time / ours): 1 from full_at up, 0 at zero_at and below, linear in between."""
    if not full_at > zero_at >= 0:
        raise ValueError(f"perf case: need full_at > zero_at >= 0, got {full_at} and {zero_at}")
    return min(1.0, max(0.0, (ratio - zero_at) / (full_at - zero_at)))


def _within(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Where got is within atol + rtol*|expected| of expected (NaN is not)."""
    got64, exp64 = got.double(), expected.double()
    return (got64 - exp64).abs_() <= exp64.abs().mul_(rtol).add_(atol)  # in place: on temporaries only


def wrong_elements(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Where got is not within atol + rtol*|expected| of expected (NaN counts as wrong)."""
    return ~_within(got, expected, atol, rtol)


# Elements compared at a time: a perf case's outputs have 10^8 elements, and whole float64
# copies of them are slow to allocate and fill. Each slice's ops are parallel regions whose
# threads wait for each other: beside another busy process, fewer regions judge faster
# (docs/performance.md).
SLICE = 1 << 20


def all_within(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> bool:
    """Whether wrong_elements would find none (same shapes), a slice at a time."""
    got, expected = got.reshape(-1), expected.reshape(-1)
    return all(
        bool(_within(got[start : start + SLICE], expected[start : start + SLICE], atol, rtol).all())
        for start in range(0, got.numel(), SLICE)
    )


def _unravel(flat: int, shape) -> tuple[int, ...]:
    """The index of element `flat` of a contiguous tensor of `shape`. torch.unravel_index's first
    call imports sympy: seconds in every grading's parent."""
    index = []
    for size in reversed(shape):
        flat, at = divmod(flat, size)
        index.append(at)
    return tuple(reversed(index))


def describe_mismatch(name: str, got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str:
    """'' when got matches expected within atol + rtol*|expected|; else where and by how much."""
    if tuple(got.shape) != tuple(expected.shape):
        return f"{name}: shape {list(got.shape)}, expected {list(expected.shape)}"
    if all_within(got, expected, atol, rtol):
        return ""
    got64, exp64 = got.double(), expected.double()
    error = (got64 - exp64).abs()
    bad = wrong_elements(got64, exp64, atol, rtol)
    allowed = atol + rtol * exp64.abs()
    excess = torch.where(torch.isnan(error), torch.full_like(error, float("inf")), error - allowed)
    index = _unravel(int(torch.argmax(excess)), excess.shape)
    finite = error[~torch.isnan(error)]
    relative = (finite / exp64.abs()[~torch.isnan(error)].clamp_min(1e-300)) if finite.numel() else finite
    lines = [
        f"{name}: {int(bad.sum())} of {got.numel()} elements differ (shape {list(got.shape)})",
        f"  worst at index {list(index)}: expected {exp64[index].item():.8g}, got {got64[index].item():.8g}",
        f"  max abs error {finite.max().item() if finite.numel() else float('nan'):.3g}, "
        f"max rel error {relative.max().item() if relative.numel() else float('nan'):.3g} "
        f"(allowed: {atol:g} + {rtol:g}*|expected|)",
    ]
    if torch.isnan(got64).any():
        lines.append(f"  {int(torch.isnan(got64).sum())} NaN in the output")
    return "\n".join(lines)


def _judge_error(case: Case, result: dict) -> Verdict:
    error = result.get("error")
    wanted = " and ".join(repr(w) for w in case.error_words)
    if error is None:
        return Verdict(False, f"expected an error naming {wanted}, but the call returned normally")
    kind, message = error
    if refusal(message):
        return Verdict(False, refusal(message))
    if kind not in ("RuntimeError", "ValueError", "TypeError", "IndexError"):
        return Verdict(False, f"expected a RuntimeError or ValueError, got {kind}: {message[:300]}")
    missing = [w for w in case.error_words if _named_at(w, message) is None]
    if missing:
        return Verdict(
            False,
            f"the error message should mention {' and '.join(map(repr, missing))}; it was: {message.strip()[:300]}",
        )
    problem = _other_arguments_named(case, message)
    return Verdict(not problem, problem and f"{problem}; it was: {message.strip()[:300]}")


def _named_at(word: str, message: str) -> int | None:
    """Where `message` first names `word` (a whole word, in any case), or None."""
    found = re.search(rf"\b{re.escape(word)}\b", message, re.IGNORECASE)
    return found and found.start()


def _other_arguments_named(case: Case, message: str) -> str:
    """'' unless the message names an argument other than the case's own: a message that names
    every argument would otherwise pass every error case. The first of the op's arguments, which
    the others are checked against, may follow the case's own ("bias must be on x's device")."""
    if not case.error_arguments:
        return ""
    first, own = case.error_arguments[0], [a for a in case.error_arguments if a in case.error_words]
    others = [a for a in case.error_arguments[1:] if a not in own and _named_at(a, message) is not None]
    if others:
        return f"the error message should name only {' and '.join(map(repr, own or [first]))}, not {others[0]!r}"
    at = _named_at(first, message)
    if own and first not in own and at is not None and at < min(_named_at(a, message) for a in own):
        return f"the error message should name {own[0]!r} first, the argument at fault, before {first!r}"
    return ""


def _own_kernel_problem(spec, case: Case, inputs: dict, result: dict, own_kernels: frozenset[str] | None) -> str:
    """'' when the op computed with code of its own: no PyTorch op but those it may call
    (course.own_code), and on a GPU no compute kernel of PyTorch's (copies and fills are
    allowed) and a kernel that the submission's own files define (`own_kernels`; None where they
    are not known: then any kernel that is neither PyTorch's nor a driver copy counts)."""
    called = own_code.ops_problem(spec, inputs.get("op"), result.get("ops", ()), result.get("ops_seen"))
    if called:
        return called
    if not case.device.startswith("cuda"):
        return ""
    kernels = list(result.get("kernels", ()))
    torch_compute = sorted(
        {
            kernel_names.identifier(k)
            for k in kernels
            if kernel_names.is_torch_kernel(k) and not kernel_names.is_torch_copy_or_fill(k)
        }
    )
    if torch_compute:
        return f"PyTorch's own kernels did the op's work: {', '.join(torch_compute)}: write the computation yourself"
    own = [
        k
        for k in kernels
        if not kernel_names.is_torch_kernel(k)
        and not kernel_names.is_transfer(k)
        and (own_kernels is None or kernel_names.identifier(k) in own_kernels)
    ]
    if not own:
        seen = sorted({kernel_names.identifier(k) or k for k in kernels})[:5]
        return (
            "no kernel of your own ran on the GPU (the profiler saw "
            f"{', '.join(seen) if seen else 'no kernel'}; yours are those your files define)"
        )
    return ""


def _exact_share_problem(op, name: str, got: torch.Tensor, expected: torch.Tensor) -> str:
    """'' unless `name` must equal the reference on a least share of its elements and does not."""
    least = dict(op.exact_share).get(name)
    if least is None or got.numel() == 0:
        return ""
    # torch.eq compares in the promoted dtype element by element, without whole float64 copies.
    equal = torch.eq(got, expected).sum().item() / got.numel()
    if equal >= least:
        return ""
    return (
        f"{name}: {equal:.4%} of its {got.numel()} elements equal the reference exactly; at least {least:.1%} "
        "must (only a near tie may round the other way)"
    )


def _values_problems(spec, inputs: dict, outputs: tuple, laid_out: dict | None = None, previous=None) -> list[str]:
    """What is wrong with `outputs` for `inputs` (count, dtypes, values); [] when nothing.
    `laid_out`: the inputs as the op saw them (strided views), where the suite lays them out;
    `previous`: the outputs of the call before, on other values (in the same buffers, or a perf
    case's input set before)."""
    op = op_for(spec, inputs)
    names = op.outputs
    if len(outputs) != len(names):
        return [f"returned {len(outputs)} outputs, expected {len(names)} ({', '.join(names)})"]
    expected = op.reference(inputs, outputs) if op.against_itself else op.reference(inputs)  # float64
    tolerances = op.tolerances(inputs)
    problems, wrong = [], {}
    for name, got, exp, dtype in zip(names, outputs, expected, op.dtypes(inputs)):
        atol, rtol = tolerances[name]
        if got.dtype != dtype:
            problems.append(f"{name}: dtype {got.dtype}, expected {dtype}")
            continue
        beyond = describe_mismatch(name, got, exp, atol, rtol)
        mismatch = beyond or _exact_share_problem(op, name, got, exp)
        if mismatch:
            problems.append(mismatch)
            if got.shape == exp.shape:  # the patterns read outputs laid out like x
                # within the tolerance but too rarely equal: the elements that differ are the wrong ones
                wrong[name] = (got, exp, wrong_elements(got, exp, atol, rtol) if beyond else got.double() != exp)
    if wrong and not op.against_itself and not any(p.startswith(f"{n}: dtype") for n in names for p in problems):
        problems += [PATTERN + line for line in _readings(op, inputs, outputs, expected, wrong, laid_out, previous)]
    return problems


def _readings(op, inputs: dict, outputs: tuple, expected: tuple, wrong: dict, laid_out, previous) -> list[str]:
    """What the wrong outputs say about their cause: a reading of the whole call where one fits
    (strides ignored, outputs swapped, a result kept from the call before); else, for each wrong
    output, the op's own reading (Op.diagnose) where it names one, else course.hints' patterns."""
    tolerances = op.tolerances(inputs)
    whole = (
        (previous is not None and hints.repeated(op.outputs, outputs, previous))
        or (laid_out is not None and hints.strides_ignored(op.reference, laid_out, outputs, tolerances, op.outputs))
        or hints.swapped(op.outputs, outputs, expected, tolerances)
    )
    if whole:
        return [whole]
    lines = []
    for name, (got, exp, bad) in wrong.items():
        own = op.diagnose(name, got, inputs) if op.diagnose else []
        lines += own or hints.explain(name, got, exp, bad, inputs)
    return lines


def _device_problems(spec, case: Case, inputs: dict, devices) -> list[str]:
    """Outputs that came back on another kind of device than the case's inputs (right values
    computed on the CPU for CUDA inputs, say); [] where all are right or none were recorded."""
    wanted = case.device.split(":")[0]
    op = op_for(spec, inputs)
    return [
        f"{name} came back on {device}, but the inputs are on {case.device}: return it on their device"
        for name, device in zip(op.outputs, devices or ())
        if name not in op.host_outputs and device.split(":")[0] != wanted
    ]


def _with_hint(problems: list[str], case: Case) -> list[str]:
    """The case's own hint, unless the mismatch's pattern already says what went wrong: a hint
    fixed per case guesses from the case's purpose and can point the wrong way."""
    if not case.hint or any(p.startswith(PATTERN) for p in problems):
        return problems
    return problems + [f"hint: {case.hint}"]


def describe_inputs(inputs: dict) -> str:
    """The largest input tensor's name, shape and dtype: what a timing was taken on."""
    tensors = [(v.numel(), k, v) for k, v in inputs.items() if isinstance(v, torch.Tensor)]
    if not tensors:
        return "no tensors"
    _, name, tensor = max(tensors, key=lambda item: item[0])
    return f"{name} {list(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}"


def _devices(result: dict, index: int):
    devices = result.get("output_devices")
    return devices[index] if devices else None


def _timing(entry: dict) -> Timing:
    return Timing(
        **{k: entry[k] for k in ("median_ms", "spread", "reps")},
        host_bound=bool(entry.get("host_bound")),
        unseen=bool(entry.get("unseen")),
    )


def judge_perf(spec, case: Case, input_sets: list[dict], result: dict, baseline) -> Verdict:
    """Points by speed against the course's reference solution, timed in a process without
    student code (`baseline`: its result dict, or why there is none); torch's time is
    reported beside it. Where no reference was timed (a notebook's public run: students do not
    have it), torch's op stands in, its speed divided by the reference's speed against torch
    where that was measured (params["reference_vs_torch"]): an estimate. Wrong outputs earn nothing."""
    if "exception" in result:
        return Verdict(False, refusal(result["exception"]) or result["exception"], 0.0)
    if not isinstance(baseline, dict) or "timing" not in baseline:
        why = baseline if isinstance(baseline, str) else (baseline or {}).get("exception", "no result")
        return Verdict(False, f"not run: the reference could not be timed here: {why}")
    wrong = _timed_outputs_problem(spec, case, input_sets, result)
    if wrong:
        return Verdict(False, wrong, 0.0)
    ours, torchs = _timing(result["timing"]), _timing(baseline["timing"])
    reference = _timing(baseline["reference_timing"]) if "reference_timing" in baseline else None
    if not 0 < ours.median_ms < float("inf"):  # the divisions below must mean something
        return Verdict(False, f"the timed run reported {ours.median_ms} ms, not a time", 0.0)
    nbytes = spec.bytes_moved(input_sets[0])
    ratio, timed = _against_reference(case, ours, torchs, reference, nbytes)
    full_at, zero_at = case.params["full_at"], case.params["zero_at"]
    fraction = perf_fraction(ratio, full_at, zero_at)
    points = round(case.points * fraction, 2)
    torch_ratio = torchs.median_ms / ours.median_ms
    message = (
        f"{timed} on {describe_inputs(input_sets[0])}: {ratio:.2f}x the reference, {torch_ratio:.2f}x torch "
        f"-> {points:g}/{case.points:g} points (full at {full_at:.2f}x the reference, zero at {zero_at:.2f}x)"
    )
    if ours.unseen:
        message += (
            "\nyour call left work on the GPU that its timing events did not see (on a stream other than "
            "the current one?): it is timed from the call until the GPU was idle"
        )
    if ours.host_bound:
        message += (
            "\nyour call spent longer on the host (Python, checks, allocations, launches) than on "
            "the GPU: look there first"
        )
    # A perf case passes when it earned points: its score says how many.
    return Verdict(fraction > 0, message, fraction, _measurements(ours, torchs, reference, ratio, nbytes))


def _timed_outputs_problem(spec, case: Case, input_sets: list[dict], result: dict) -> str:
    """Why the timed calls' outputs earn nothing (a wrong value or device), or ''."""
    for index, (inputs, outputs) in enumerate(zip(input_sets, result["outputs"], strict=True)):
        previous = result["outputs"][index - 1] if index else None  # a stale answer repeats it
        problems = _device_problems(spec, case, inputs, _devices(result, index)) or _values_problems(
            spec, inputs, outputs, previous=previous
        )
        if problems:
            first = (
                f"the output of the timed calls on input set {index + 1} of "
                f"{len(input_sets)} was wrong, so their time earns no points:"
            )
            return "\n".join([first, *_with_hint(problems, case)])
    return ""


def _against_reference(case: Case, ours, torchs, reference, nbytes: int) -> tuple[float, str]:
    """(the reference's time over ours, what was timed): the reference's own time where it ran,
    else torch's scaled by the reference's measured speed against it."""
    if reference is not None:
        return reference.median_ms / ours.median_ms, (
            f"yours {ours.median_ms:.3f} ms ({ours.gbs(nbytes):.0f} GB/s), the reference "
            f"{reference.median_ms:.3f} ms ({reference.gbs(nbytes):.0f} GB/s), torch {torchs.median_ms:.3f} ms"
        )
    stand_in = case.params.get("reference_vs_torch", 1.0)
    return torchs.median_ms / ours.median_ms / stand_in, (
        f"yours {ours.median_ms:.3f} ms ({ours.gbs(nbytes):.0f} GB/s), torch {torchs.median_ms:.3f} ms "
        f"({torchs.gbs(nbytes):.0f} GB/s); the reference is not here: estimated as torch's speed "
        f"x{stand_in:g} (what it measured where it was last timed)"
    )


def _measurements(ours, torchs, reference, ratio: float, nbytes: int) -> dict:
    measurements = {
        "ours_ms": ours.median_ms,
        "torch_ms": torchs.median_ms,
        "ours_gbs": ours.gbs(nbytes),
        "torch_gbs": torchs.gbs(nbytes),
        "ratio": ratio,
        "torch_ratio": torchs.median_ms / ours.median_ms,
        "ours_spread": ours.spread,
        "torch_spread": torchs.spread,
        "bytes": nbytes,
    }
    if reference is not None:
        measurements.update(
            reference_ms=reference.median_ms, reference_gbs=reference.gbs(nbytes), reference_spread=reference.spread
        )
    return measurements


def _draw_named(case: Case, index: int, count: int) -> str:
    """How a message names the call on input set `index` of `count` (the first goes unnamed)."""
    if index and index == count - 1 and case.called_fresh:
        return f"on call {index + 1} of {count}, with new values in new buffers: "
    if index == 1 and ROTATED in case.checks:
        return "on the second call, with new values in the same buffers: "
    return f"on input draw {index + 1} of {count} (new values in the same buffers): " if index else ""


LAID_OUT_ELEMENTS = 1 << 22  # cases up to this size are laid out again in the parent for a reading


def _laid_out(spec, case: Case, inputs: dict) -> dict | None:
    """The inputs as the op saw them: the suite's layouts (strided views) made again, on the CPU;
    None where the suite makes none, or the case is too large to copy."""
    if (
        not hasattr(spec, "on_device")
        or case.kind != "values"
        or (case.elements or LAID_OUT_ELEMENTS + 1) > LAID_OUT_ELEMENTS
    ):
        return None
    return spec.on_device(case, dict(inputs))


def _draws_problems(spec, case: Case, input_sets: list[dict], result: dict) -> list[str]:
    """The problems of the first input set whose outputs are wrong, named by its call; [] when
    every set's are right."""
    for index, (inputs, outputs) in enumerate(zip(input_sets, result["outputs"], strict=True)):
        previous = result["outputs"][index - 1] if index else None
        problems = _device_problems(spec, case, inputs, _devices(result, index)) or _values_problems(
            spec, inputs, outputs, _laid_out(spec, case, inputs), previous
        )
        if problems:
            named = _draw_named(case, index, len(input_sets))
            return [p if p.startswith(PATTERN) else named + p for p in problems]
    return []


def _overlaps(span: list[int], others: list[list[int]]) -> bool:
    start, end = span
    return start < end and any(other_start < end and start < other_end for other_start, other_end in others)


def _same_values(got: torch.Tensor, before: torch.Tensor) -> bool:
    """Bit for bit, NaN where there was NaN."""
    if got.shape != before.shape or got.dtype != before.dtype:
        return False
    if not got.is_floating_point():
        return torch.equal(got, before)
    return bool(torch.eq(got, before).logical_or_(got.isnan() & before.isnan()).all())


def _fresh_call_problems(spec, input_sets: list[dict], result: dict) -> list[str]:
    """A case called last on new buffers (Case.called_fresh; the harness's "memory" and
    "first_after"): no output may share memory with its own call's inputs or with the first
    call's outputs, and the first call's outputs must still hold what they held."""
    memory, after = result.get("memory"), result.get("first_after")
    if memory is None or after is None:  # not such a case (the grader's schema asks for both where it is)
        return []
    op = op_for(spec, input_sets[-1])
    own = [i for i, name in enumerate(op.outputs) if name not in op.in_place]  # in place: an input by design
    first, last, before = (
        [memory["first"][i] for i in own],
        [memory["last"][i] for i in own],
        [result["outputs"][0][i] for i in own],
    )
    names, after = [op.outputs[i] for i in own], [after[i] for i in own]
    problems = [
        f"{name} shares memory with an input: return a new tensor, not an input or a view of one"
        for spans, inputs in ((first, memory["first_inputs"]), (last, memory["last_inputs"]))
        for name, span in zip(names, spans)
        if _overlaps(span, inputs)
    ]
    problems += [
        f"{name} of the last call shares memory with an output of the first call: every call must "
        "return new tensors, not a buffer kept from an earlier call"
        for name, span in zip(names, last)
        if _overlaps(span, first)
    ]
    problems += [
        f"{name} of the first call changed when the op was called again: every call must return new "
        "tensors, not a buffer kept from an earlier call"
        for name, got, was in zip(names, after, before)
        if not _same_values(got, was)
    ]
    return problems[:1]  # the first says enough: a kept buffer both shares memory and changes


def judge(
    spec, case: Case, input_sets: list[dict], result: dict, baseline=None, own_kernels: frozenset[str] | None = None
) -> Verdict:
    """`baseline`: for a perf case, the result of timing torch's own op and the reference on
    the same inputs.
    `own_kernels`: the identifiers of the kernels the submission's files define
    (course.kernel_names), for an own-kernel check."""
    if case.kind == "perf":
        return judge_perf(spec, case, input_sets, result, baseline)
    if "exception" in result:  # the op failed on valid input, or refused to run a function still to write
        return Verdict(False, refusal(result["exception"]) or result["exception"])
    if case.kind == "error":
        return _judge_error(case, result)
    problems = _draws_problems(spec, case, input_sets, result)
    kept = [] if problems else _fresh_call_problems(spec, input_sets, result)
    if kept:  # the case's hint is about its values, which were right
        return Verdict(False, "\n".join(kept))
    if INPUTS_UNCHANGED in case.checks and not problems:
        changed = [
            f"the op changed its input {name}: inputs must be left as they were"
            for name, after in result.get("inputs_after", {}).items()
            if not torch.equal(after, input_sets[-1][name])
        ]
        if changed:  # the case's hint is about its values, which were right
            return Verdict(False, "\n".join(changed))
    if OWN_KERNEL in case.checks and not problems:
        problem = _own_kernel_problem(spec, case, input_sets[-1], result, own_kernels)
        if problem:
            problems.append(problem)
    if problems:
        return Verdict(False, "\n".join(_with_hint(problems, case)))
    return Verdict(True)
