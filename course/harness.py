"""Runs a unit's op on a case's inputs and collects what the judge needs.

This is the only code that touches the student's module. It returns plain data
(CPU tensors, strings, timings); it never decides pass or fail.
"""

from __future__ import annotations

import contextlib
import os
from typing import NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from course.bench import time_op
from course.cases import INPUTS_UNCHANGED, OWN_KERNEL, POISON, SIDE_STREAM, Case
from course.ops import call

_SLEEP_CYCLES = 50_000_000  # ~25 ms of a side stream's time before its inputs arrive


UNFILLED = "COURSE_NEW_MEMORY_UNFILLED"  # set to 1: new tensors are not filled with NaN
# Off while a perf case is timed (as_timed), and in a process run under initcheck (UNFILLED,
# course/sanitize.py, tool_env), which must see the memory an op never writes as unwritten.
_fill_new_memory = os.environ.get(UNFILLED) != "1"


@contextlib.contextmanager
def empty_is_nan():
    """at::empty (from C++ too) fills new memory with NaN while deterministic mode is on: an
    op run inside this shows every output element it never writes as NaN. Specs wrap their
    calls in it. Timed calls run as users run them: filling there would add a write of every
    output to the op's time and none to torch's."""
    if not _fill_new_memory:
        yield
        return
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def nan_filled(run):
    """`run(ext, inputs)` as an op's call inside empty_is_nan: an output element the op never
    writes shows up as NaN."""

    def wrapped(ext, inputs):
        with empty_is_nan():
            return run(ext, inputs)

    return wrapped


def to_device(spec, case: Case, inputs: dict) -> dict:
    moved = {k: v.to(case.device, copy=True) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    # Layouts and devices that a copy would not keep (strided views, a tensor left on
    # the CPU) are made here, on the device, by the spec.
    return spec.on_device(case, moved) if hasattr(spec, "on_device") else moved


def _as_tuple(outputs) -> tuple:
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)


def for_judge(outputs) -> tuple[tuple, tuple[str, ...]]:
    """The outputs copied to the CPU for the judge, and the devices the op returned them on."""
    outputs = _as_tuple(outputs)
    return tuple(t.detach().to("cpu", copy=True) for t in outputs), tuple(str(t.device) for t in outputs)


def collected(pairs: list[tuple]) -> dict:
    """for_judge's pairs, one per input set, as the result's "outputs" and "output_devices"."""
    return {"outputs": [p[0] for p in pairs], "output_devices": [p[1] for p in pairs]}


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _poison_allocator(metas: list, device: str) -> None:
    """Hand the caching allocator blocks full of NaN of the outputs' sizes: the op's
    torch::empty outputs then start as NaN, so an element it never writes shows."""
    blocks = [
        torch.full(shape, float("nan") if dtype.is_floating_point else -1, dtype=dtype, device=device)
        for shape, dtype in metas
    ]
    synchronize(device)
    del blocks


def _call_on_side_stream(spec, ext, inputs: dict, device: str) -> tuple:
    """Inputs are copied in on a side stream after a delay; an op that launches on the
    legacy default stream instead of the current one reads them before they arrive."""
    # One call first, on the default stream: CUDA loads a kernel at its first launch, and the
    # load waits for the whole device, side stream included, which would hide the bug.
    call(spec, ext, {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()})
    torch.cuda.synchronize()
    pinned = {k: v.pin_memory() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    buffers = {
        k: torch.full_like(v, float("nan"), device=device) if isinstance(v, torch.Tensor) else v
        for k, v in inputs.items()
    }
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(_SLEEP_CYCLES)
        for k, v in pinned.items():
            if isinstance(v, torch.Tensor):
                buffers[k].copy_(v, non_blocking=True)
        outputs = for_judge(call(spec, ext, buffers))
    stream.synchronize()
    return outputs


# The GPU's own work, by the profiler's activity: not the spans of record_function ranges
# (gpu_user_annotation), which cover the idle gaps between a range's kernels too.
_GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


class Profiled(NamedTuple):
    ops: list[str]  # the host's
    kernels: list[str]  # the GPU's
    busy_ms: float  # how long the GPU was busy with the call's work
    outputs: object  # what the call returned


def profile(spec, ext, inputs: dict, device: str) -> Profiled:
    """One call under the profiler. Its outputs are the ones to judge: an op that computes
    one way while profiled and another while not is then judged on the way it was seen."""
    # torch.autograd's profiler, not torch.profiler's wrapper of it: the wrapper's first start
    # imports torch._inductor (seconds), which a child would spend inside the case's time.
    synchronize(device)  # nothing queued before the call runs inside the profile
    gpu = "cuda" if device.startswith("cuda") else None
    with torch.autograd.profiler.profile(use_device=gpu, use_kineto=True) as prof:
        outputs = call(spec, ext, inputs)
        synchronize(device)
    events = list(prof.function_events)
    ops = sorted({event.name for event in events if not _on_gpu(event)})
    kernels = sorted({event.name for event in events if _on_gpu(event)})
    work = [(event.time_range.start, event.time_range.end) for event in events if _is_gpu_work(event)]
    return Profiled(ops, kernels, covered(work) / 1e3, outputs)


def _on_gpu(event) -> bool:
    return getattr(event, "device_type", None) == torch.autograd.DeviceType.CUDA


def _is_gpu_work(event) -> bool:
    """A kernel, copy or fill the GPU ran. (Profilers older than FunctionEvent.activity_type:
    any GPU event but a user annotation's range.)"""
    if not _on_gpu(event):
        return False
    activity = getattr(event, "activity_type", None)
    return activity in _GPU_WORK if activity else not getattr(event, "is_user_annotation", False)


def covered(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals: kernels that overlap on several
    streams count once."""
    total, reached = 0.0, float("-inf")
    for start, end in sorted(intervals):
        start = max(start, reached)
        if end > start:
            total += end - start
            reached = end
    return total


class _OpsSeen(TorchDispatchMode):
    """The ATen ops of the calls made inside it, named as the profiler names them ("aten::relu"),
    seen without the profiler: an op that computes with PyTorch only while no profiler is on
    is seen doing so here."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Else torch wraps __torch_dispatch__ to keep torch.compile out of it, and that wrapper
        # imports torch._dynamo on the first op: seconds, inside the case's time.
        return False

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func._schema.name)
        kernel = _backend_kernel(func, args, kwargs)
        if kernel is None:
            return func(*args, **(kwargs or {}))
        # An operator of the submission's own (torch.library): the mode stays on while its kernel
        # runs, which would otherwise run with the mode off, its ATen calls unseen.
        with self:
            return func.redispatch(torch._C.DispatchKeySet(kernel), *args, **(kwargs or {}))


def _backend_kernel(func, args, kwargs):
    """The dispatch key of the kernel an operator outside PyTorch's namespaces runs for its
    tensors' device, where it has one (its own, or one for every device); None for PyTorch's own
    operators."""
    if func.namespace in ("aten", "prims"):
        return None
    tensors = [a for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
    if not tensors:
        return None
    name = torch._C._dispatch_key_for_device(tensors[0].device.type)
    key = getattr(torch._C.DispatchKey, name, None)
    has = key is not None and torch._C._dispatch_has_computed_kernel_for_dispatch_key(func.name(), name)
    return key if has else None


@contextlib.contextmanager
def as_timed():
    """Calls made as the timer makes them: new memory is not filled with NaN (empty_is_nan)."""
    global _fill_new_memory
    before, _fill_new_memory = _fill_new_memory, False
    try:
        yield
    finally:
        _fill_new_memory = before


def _timing(op, arg_sets: list[tuple], device: str):
    with as_timed():
        return time_op(op, arg_sets, device=device)


def _timing_entry(timing) -> dict:
    return {
        "median_ms": timing.median_ms,
        "spread": timing.spread,
        "reps": timing.reps,
        "host_bound": timing.host_bound,
        "unseen": timing.unseen,
        "gpu_ms": timing.gpu_ms,
        "host_ms": timing.host_ms,
    }  # apart, for a host-bound call's report


def _time(spec, ext, case: Case, input_sets: list[dict], reference=None) -> dict:
    """Time torch's own op (spec.baseline), then the op, over the rotating input sets. With
    ext None (a run that loads no student code), only torch's op, and the course's reference
    solution when one is given. torch's op runs first in every run, so the reference and the
    student's op are timed after the same work (what it leaves warm: the CPU's clocks, the
    allocator's blocks), each in a process of its own."""
    arg_sets = [(to_device(spec, case, inputs),) for inputs in input_sets]
    torchs = _timing_entry(_timing(spec.baseline, arg_sets, case.device))
    if ext is None:
        result = {"timing": torchs}
        if reference is not None:
            timing = _timing(lambda inputs: call(spec, reference, inputs), arg_sets, case.device)
            result["reference_timing"] = _timing_entry(timing)
        return result
    timing = _timing(lambda inputs: call(spec, ext, inputs), arg_sets, case.device)
    # What the last timed call on each set returned, for the judge: an answer kept from an
    # earlier call (by the inputs' shape, say) is wrong on the other sets. torch's time from
    # this process serves the notebook; the grader takes it from the run without student code.
    return {
        "timing": _timing_entry(timing),
        "torch_timing": torchs,
        **collected([for_judge(o) for o in timing.last_outputs]),
    }


def _refill(buffers: dict, inputs: dict) -> None:
    """The input set's values into the same buffers."""
    for k, v in inputs.items():
        if isinstance(v, torch.Tensor):
            buffers[k].copy_(v)
        elif k in buffers:  # a number drawn with the tensors (an eps that makes a tie exact)
            buffers[k] = v


def _memory(values) -> list[list[int]]:
    """[first byte, end) of the memory of each tensor's storage ([0, 0] for none: an empty
    tensor or no tensor), as numbers for the judge."""
    spans = []
    for value in values:
        storage = value.untyped_storage() if isinstance(value, torch.Tensor) else None
        start = storage.data_ptr() if storage is not None and storage.nbytes() else 0
        spans.append([start, start + storage.nbytes()] if start else [0, 0])
    return spans


def _fresh_call_data(first: tuple, last: tuple, first_inputs: dict, last_inputs: dict) -> dict:
    """What the judge reads of a case called last on new buffers (Case.called_fresh): the first
    call's outputs as they are now, and where every output and input tensor lies in memory."""
    return {
        "first_after": for_judge(first)[0],
        "memory": {
            "first": _memory(first),
            "last": _memory(last),
            "first_inputs": _memory(first_inputs.values()),
            "last_inputs": _memory(last_inputs.values()),
        },
    }


def execute(spec, ext, case: Case, input_sets: list[dict], reference=None) -> dict:
    """Run the case; return {"outputs": [tuple per input set], "output_devices": [the devices
    they came back on, per set], ...} or {"error": (type, message)}; a perf case: {"timing":
    {"median_ms", "spread", "reps", "host_bound", "unseen"}, "torch_timing": {...}, "outputs",
    "output_devices"} (what the last timed call on each set returned), or with ext None torch's
    timing, and the reference's as "reference_timing" when given."""
    device = case.device
    result: dict = {}
    if case.kind == "perf":
        return _time(spec, ext, case, input_sets, reference)
    if case.kind == "error":
        try:
            call(spec, ext, to_device(spec, case, input_sets[0]))
            synchronize(device)
            result["error"] = None
        except Exception as error:
            result["error"] = (type(error).__name__, str(error))
        return result

    if SIDE_STREAM in case.checks:
        return collected([_call_on_side_stream(spec, ext, s, device) for s in input_sets])
    return _values_calls(spec, ext, case, input_sets)


def _values_calls(spec, ext, case: Case, input_sets: list[dict]) -> dict:
    """A values case's result: a call on each input set, the first in new buffers, the next in
    the same ones refilled, and where the case is called fresh the last in new buffers again."""
    device, result = case.device, {}
    buffers = to_device(spec, case, input_sets[0])
    fresh = len(input_sets) - 1 if case.called_fresh and len(input_sets) > 1 else None
    pairs, first = [], None
    for index, inputs in enumerate(input_sets):
        if index == fresh:  # new buffers; the first call's inputs and outputs stay alive beside them
            first_inputs, buffers = buffers, to_device(spec, case, inputs)
        elif index:  # same buffers, new values: results cached by pointer or shape show
            _refill(buffers, inputs)
        profiled_here = OWN_KERNEL in case.checks and index == len(input_sets) - 1
        if profiled_here:
            with _OpsSeen() as seen:
                call(spec, ext, buffers)
                synchronize(device)
            _refill(buffers, inputs)  # the judged call sees the set's values, whatever this one did
        if POISON in case.checks:
            poisoned = _as_tuple(call(spec, ext, buffers))
            metas = [(t.shape, t.dtype) for t in poisoned]
            del poisoned  # its blocks go back to the allocator, to be poisoned and handed out again
            _poison_allocator(metas, device)
        if profiled_here:
            profiled = profile(spec, ext, buffers, device)  # the last set's judged call
            # Apart, for the judge to compare: an op that behaves differently under each shows there.
            result["ops"], result["ops_seen"] = profiled.ops, sorted(seen.names)
            result["kernels"], got = profiled.kernels, _as_tuple(profiled.outputs)
        else:
            got = _as_tuple(call(spec, ext, buffers))
            synchronize(device)
        first = got if index == 0 else first
        pairs.append(for_judge(got))
    if fresh is not None:
        result.update(_fresh_call_data(first, got, first_inputs, buffers))
    result.update(collected(pairs))
    if INPUTS_UNCHANGED in case.checks:
        result["inputs_after"] = {k: v.detach().cpu() for k, v in buffers.items() if isinstance(v, torch.Tensor)}
    return result
