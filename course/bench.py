"""Timing ops honestly, the one harness the notebooks, the autograder and bench/ share.

On a GPU: CUDA events, warm-up, an L2 flush before every timed call, inputs rotated over
sets and copied into new storage for each call so nothing is served from a cache, median
and spread reported. On the CPU the same
loop runs with time.perf_counter and no flush, so the machinery works (and is
tested) without a GPU.

A GPU call costs the longer of two times, both measured on every call: the GPU's (events
around the call) and the host's (until the call returns: Python, checks, allocations,
launches). Back-to-back calls run at the slower of the two. To keep the two apart, a sleep
kernel holds the stream until the host has enqueued the whole call; without it, the events
would also catch whatever part of the host's time the flush happened not to cover, in some
runs and not in others.

The events see only the current stream. A few calls are also timed whole, from the call
until the device is idle (every stream's work included): where that takes longer than the
host's time and the GPU's together, twice over, the op left work the events did not see, and
the whole time is its time.
"""

from __future__ import annotations

import platform
import statistics
import time
from dataclasses import dataclass, field

import torch

# Bound at import, before any student code loads: a submission that patches time's or
# torch's timing functions in its own process does not reach the timer through them.
_clock = time.perf_counter


def _base_method(base: str, fallback: type, name: str):
    """torch._C's own method, where this build has it: a build without CUDA has placeholder
    bases with no methods, and its wrappers' methods serve instead."""
    return getattr(getattr(torch._C, base, None), name, None) or getattr(fallback, name)


_elapsed_ms, _record, _wait_for_event = (
    _base_method("_CudaEventBase", torch.cuda.Event, name) for name in ("elapsed_time", "record", "synchronize")
)
_stream_idle = _base_method("_CudaStreamBase", torch.cuda.Stream, "query")
_current_stream = torch.cuda.current_stream
_device_synchronize = getattr(torch._C, "_cuda_synchronize", torch.cuda.synchronize)
_sleep = getattr(torch._C, "_cuda_sleep", torch.cuda._sleep)

WHOLE_CALLS = 5  # calls timed from the call until the device is idle
# A whole call takes at most the host's time and the GPU's one after the other (the first
# kernel waits for the host's launch, the host can add nothing after the last); past that by
# this much, the events missed work.
UNSEEN_FACTOR, UNSEEN_MARGIN_MS = 1.2, 0.02
# Below about this many bytes moved, a call's time through Python is mostly the host's
# (launches, dispatch, autograd): a ratio there measures those, not kernels, and is no target.
GPU_BOUND_BYTES = 64 << 20


@dataclass
class Timing:
    median_ms: float
    spread: float  # (p80 - p20) / median
    reps: int
    host_bound: bool = False  # the host took longer than the GPU on most calls
    gpu_ms: float = 0.0  # medians of the two times each call is the longer of
    host_ms: float = 0.0
    unseen: bool = False  # work the events missed made the whole calls slower: median_ms is theirs
    # What the latest timed call on each arg set returned: a result is checked after
    # timing, so a fast wrong op cannot pass on a call made outside the loop.
    last_outputs: list = field(default_factory=list, repr=False)
    on_gpu: bool = False  # timed with CUDA events: gpu_ms and host_ms are apart

    def gbs(self, nbytes: int) -> float:
        return nbytes / (self.median_ms * 1e-3) / 1e9


_flush_buffer: torch.Tensor | None = None


def flush_l2() -> None:
    """Overwrite the L2 cache (twice its size) so the next call reads from memory."""
    global _flush_buffer
    if _flush_buffer is None:
        size = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 64 << 20)
        _flush_buffer = torch.empty(2 * max(size, 1 << 20), dtype=torch.uint8, device="cuda")
    _flush_buffer.zero_()


def _on_cuda(values) -> bool:
    """Whether any tensor in `values` (nested tuples, lists, dicts) lives on a GPU."""
    items = values.values() if isinstance(values, dict) else values
    for value in items:
        if isinstance(value, (tuple, list, dict)) and _on_cuda(value):
            return True
        if isinstance(value, torch.Tensor) and value.is_cuda:
            return True
    return False


_sleep_cycles_per_ms: float | None = None


def _hold_stream(ms: float) -> None:
    """Keep the current stream busy for about `ms` with a kernel that only waits."""
    global _sleep_cycles_per_ms
    if _sleep_cycles_per_ms is None:
        _sleep(1)  # its first launch loads the kernel, while a start event would wait
        _device_synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        _record(start, _current_stream())
        _sleep(1_000_000)
        _record(end, _current_stream())
        _wait_for_event(end)
        _sleep_cycles_per_ms = 1_000_000 / max(_elapsed_ms(start, end), 1e-3)
    _sleep(int(ms * _sleep_cycles_per_ms))


def _gpu_done() -> bool:
    """Whether the current stream has run everything it was given."""
    return _stream_idle(_current_stream())


def _waits_for_gpu(fn, args, hold_ms: float) -> bool:
    """Whether fn returns only once the GPU has run what was queued before it. Called behind a
    hold longer than its own host time, an op that does not wait returns with the hold still
    running; one that waits finds the stream idle. (An op whose kernels merely end before its
    host work does, as autograd's may, must not be mistaken for one that waits: an idle stream
    after an unheld call proves nothing.) Twice, so that one slow call cannot decide it."""
    for _ in range(2):
        _hold_stream(hold_ms)
        fn(*args)
        idle = _gpu_done()
        _device_synchronize()
        if not idle:
            return False
    return True


def _cuda_call_ms(fn, args, hold_ms: float) -> tuple[float, float, object]:
    """(GPU ms, host ms, outputs) of one call on a cold L2; hold_ms 0: on an idle GPU."""
    flush_l2()
    if hold_ms > 0:
        _hold_stream(hold_ms)
    else:
        _device_synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    _record(start, _current_stream())
    host_start = _clock()
    outputs = fn(*args)
    host_ms = (_clock() - host_start) * 1e3
    _record(end, _current_stream())
    _wait_for_event(end)
    return _elapsed_ms(start, end), host_ms, outputs


def _until_idle_ms(fn, args) -> float:
    """ms from the call until the whole device is idle, on a cold L2: work on any stream counts."""
    flush_l2()
    _device_synchronize()
    start = _clock()
    fn(*args)
    _device_synchronize()
    return (_clock() - start) * 1e3


def _whole_call_ms(fn, arg_sets: list[tuple]) -> float:
    """The median of WHOLE_CALLS calls timed until the device is idle, less what that costs a
    call that does nothing (a kernel of one cycle)."""
    idle = statistics.median(_until_idle_ms(_sleep, (1,)) for _ in range(WHOLE_CALLS))
    whole = statistics.median(
        _until_idle_ms(fn, fresh_inputs(arg_sets[index % len(arg_sets)])) for index in range(WHOLE_CALLS)
    )
    return max(whole - idle, 0.0)


def _cpu_call_ms(fn, args, hold_ms: float) -> tuple[float, float, object]:
    start = _clock()
    outputs = fn(*args)
    elapsed = (_clock() - start) * 1e3
    return elapsed, elapsed, outputs


def _fresh_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of `tensor` in new storage, with its shape, strides, storage offset (so its
    alignment), dtype and device."""
    span = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride())) if tensor.numel() else 0
    base = torch.empty(tensor.storage_offset() + span, dtype=tensor.dtype, device=tensor.device)
    # The storage the tensor spans is copied whole, not element by element: an expanded tensor
    # (a stride of 0) reads one element many times, which copy_ cannot write back.
    base[tensor.storage_offset() :].copy_(tensor.as_strided((span,), (1,), tensor.storage_offset()))
    return base.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())


def fresh_inputs(values):
    """`values` (tuples, lists, dicts) with every tensor copied into new storage. Each timed call
    gets such a copy, made outside its time: a result cached by the inputs' address, or by address
    and version counter, is then a miss, or another call's answer, which the check of the outputs
    catches; never a quick right answer. A tensor that requires grad is part of an autograd graph
    (the forward whose backward torch's op is timed on): it stays, since a copy would be cut off
    from that graph."""
    if isinstance(values, torch.Tensor):
        return values if values.requires_grad else _fresh_tensor(values)
    if isinstance(values, dict):
        return {key: fresh_inputs(value) for key, value in values.items()}
    if isinstance(values, (tuple, list)):
        return type(values)(fresh_inputs(value) for value in values)
    return values


def time_op(
    fn,
    arg_sets: list[tuple],
    warmup: int = 3,
    min_reps: int = 10,
    max_reps: int = 200,
    budget_s: float = 1.0,
    target_spread: float = 0.05,
    device: str | None = None,
) -> Timing:
    """Time fn(*args) over rotating arg_sets until the spread is small or the budget is spent.
    The device is the arguments' (CUDA if any tensor is on a GPU) unless named."""
    cuda = device.startswith("cuda") if device else _on_cuda(arg_sets[0])
    hold_ms = _warm_up(fn, arg_sets, warmup, cuda)
    call_ms = _cuda_call_ms if cuda else _cpu_call_ms
    last_outputs: list = [None] * len(arg_sets)
    times: list[float] = []
    gpu_times: list[float] = []
    host_times: list[float] = []
    spent = 0.0
    while len(times) < max(max_reps, len(arg_sets)):
        index = len(times) % len(arg_sets)
        gpu_ms, host_ms, last_outputs[index] = call_ms(fn, fresh_inputs(arg_sets[index]), hold_ms)
        times.append(max(gpu_ms, host_ms))
        gpu_times.append(gpu_ms)
        host_times.append(host_ms)
        spent += times[-1] / 1e3
        if len(times) >= max(min_reps, len(arg_sets)):  # every set timed, so every set's output judged
            if _spread(times) < target_spread or spent > budget_s:
                break
    gpu_ms, host_ms = statistics.median(gpu_times), statistics.median(host_times)
    host_bound = cuda and sum(host > gpu for gpu, host in zip(gpu_times, host_times)) > len(times) / 2
    whole = _unseen_work_ms(fn, arg_sets, gpu_ms, host_ms, hold_ms) if cuda else None
    median = statistics.median(times) if whole is None else whole
    return Timing(
        median, _spread(times), len(times), host_bound, gpu_ms, host_ms, whole is not None, last_outputs, on_gpu=cuda
    )


def _warm_up(fn, arg_sets: list[tuple], warmup: int, cuda: bool) -> float:
    """Warm-up calls; returns how long each timed call holds the GPU before its work is enqueued."""
    warmup_host_ms = []
    for index in range(max(warmup, 1)):
        start = _clock()
        fn(*arg_sets[index % len(arg_sets)])
        warmup_host_ms.append((_clock() - start) * 1e3)
        if cuda:
            torch.cuda.synchronize()
    # Long enough for the host to enqueue a call (twice its quickest warm-up call), capped:
    # an op slower than that on the host is host-bound, and charged the host's time anyway.
    # An op that returns only once the GPU is done (.item(), a copy to the host) would wait
    # for the hold as well and be charged it: it gets none, and starts on an idle GPU.
    hold_ms = min(2 * min(warmup_host_ms) + 0.05, 20.0)
    return 0.0 if cuda and _waits_for_gpu(fn, arg_sets[0], hold_ms) else hold_ms


def _unseen_work_ms(fn, arg_sets: list[tuple], gpu_ms: float, host_ms: float, hold_ms: float) -> float | None:
    """A whole call's time, until the GPU is idle, where the events missed work; else None.
    A hiccup (another process on the host, clocks still rising) can slow a few whole calls;
    work the events missed slows every set of them. So a second set must agree. Without a
    hold the events already span the host's enqueueing: host time counts once."""
    limit = UNSEEN_FACTOR * (max(gpu_ms, host_ms) if hold_ms == 0 else gpu_ms + host_ms) + UNSEEN_MARGIN_MS
    whole = _whole_call_ms(fn, arg_sets)
    if whole > limit:
        whole = min(whole, _whole_call_ms(fn, arg_sets))
    return whole if whole > limit else None


def _spread(times: list[float]) -> float:
    ordered = sorted(times)
    low, high = ordered[len(ordered) // 5], ordered[(4 * len(ordered)) // 5]
    return (high - low) / statistics.median(ordered)


def copy_ceiling_gbs(nbytes: int = 512 << 20, device: str | None = None) -> float:
    """The device's practical memory bandwidth: a large copy, bytes read + written."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    source = torch.empty(nbytes, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    return time_op(lambda: target.copy_(source), [()], min_reps=10, max_reps=50, device=device).gbs(2 * nbytes)


@dataclass
class Row:
    """One line of a comparison: our op and torch's on the same inputs."""

    name: str
    nbytes: int  # bytes the op must move at least; GB/s are counted from it
    ours: Timing
    baseline: Timing  # torch's own op
    ceiling_gbs: float | None = None
    d: int | None = None  # the x axis of plot_gbs
    problem: str = ""  # why our outputs were wrong; '' when they were right

    @property
    def wrong(self) -> bool:
        return bool(self.problem)

    @property
    def ours_gbs(self) -> float:
        return self.ours.gbs(self.nbytes)

    @property
    def baseline_gbs(self) -> float:
        return self.baseline.gbs(self.nbytes)

    @property
    def speedup(self) -> float:
        """torch's time / ours: above 1 is faster than torch."""
        return self.baseline.median_ms / self.ours.median_ms

    @property
    def of_ceiling(self) -> float | None:
        return self.ours_gbs / self.ceiling_gbs if self.ceiling_gbs else None


def compare(
    name: str,
    ours_fn,
    torch_fn,
    arg_sets: list[tuple],
    nbytes: int,
    check=None,
    ceiling: float | None = None,
    d: int | None = None,
    **timing_options,
) -> Row:
    """Time ours_fn and torch_fn on the same rotating arg_sets, then check what ours_fn
    returned inside the timing loop: check(outputs, args) gives '' or a problem."""
    ours = time_op(ours_fn, arg_sets, **timing_options)
    baseline = time_op(torch_fn, arg_sets, **timing_options)
    problem = ""
    if check is not None:
        for outputs, args in zip(ours.last_outputs, arg_sets):
            if outputs is not None:
                problem = check(outputs, args)
                if problem:
                    break
    ours.last_outputs = baseline.last_outputs = []  # checked: free the memory
    return Row(name, nbytes, ours, baseline, ceiling, d, problem)


def device_name() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"CPU {platform.processor() or platform.machine()}".strip()


def format_table(rows: list[Row], ceiling: float | None = None, title: str = "benchmark") -> str:
    """The rows as a text table, titled with the device, torch version and copy ceiling. On a
    GPU, the rows moving fewer than GPU_BOUND_BYTES follow apart, as host and GPU time a call."""
    ceiling_text = f"copy ceiling {ceiling:.0f} GB/s" if ceiling else "copy ceiling not measured"
    on_gpu = any(row.ours.on_gpu for row in rows)
    small = [on_gpu and row.nbytes < GPU_BOUND_BYTES for row in rows]
    width = max([len(r.name) for r in rows] + [4])
    lines = [f"{title}: {device_name()}, torch {torch.__version__}, {ceiling_text}"]
    kernel_rows = [row for row, is_small in zip(rows, small) if not is_small]
    host_rows = [row for row, is_small in zip(rows, small) if is_small]
    if kernel_rows:
        lines += _kernel_lines(kernel_rows, width)
    if host_rows:
        lines += _host_lines(host_rows, width)
    return "\n".join(lines)


def _check_text(row: Row) -> str:
    return ("WRONG: " + row.problem.strip().splitlines()[0][:80]) if row.wrong else "ok"


def _kernel_lines(rows: list[Row], width: int) -> list[str]:
    lines = [
        f"{'case':<{width}} {'ours ms':>9} {'spread':>7} {'ours GB/s':>10} {'torch ms':>9} "
        f"{'torch GB/s':>11} {'ours/torch':>10} {'of ceiling':>10}  check",
    ]
    for row in rows:
        speedup = "wrong" if row.wrong else f"{row.speedup:.2f}x"
        of_ceiling = f"{row.of_ceiling:.0%}" if row.of_ceiling is not None else "-"
        ours_ms, torch_ms = (f"{t.median_ms:.3f}" + ("*" if t.host_bound else "") for t in (row.ours, row.baseline))
        lines.append(
            f"{row.name:<{width}} {ours_ms:>9} {row.ours.spread:>7.1%} "
            f"{row.ours_gbs:>10.1f} {torch_ms:>9} {row.baseline_gbs:>11.1f} "
            f"{speedup:>10} {of_ceiling:>10}  {_check_text(row)}"
        )
    bound = [row for row in rows if row.ours.host_bound or row.baseline.host_bound]
    if bound:
        lines.append(
            "* host-bound: the call's Python and launch work took longer than its GPU work; "
            "host and GPU ms of such rows:"
        )
        lines += [
            f"  {row.name:<{width}} ours {row.ours.host_ms:.3f} / {row.ours.gpu_ms:.3f}, "
            f"torch {row.baseline.host_ms:.3f} / {row.baseline.gpu_ms:.3f}"
            for row in bound
        ]
    return lines


def _host_lines(rows: list[Row], width: int) -> list[str]:
    """Shapes too small for the kernels to set the time: what a call costs the host, and the
    GPU apart. The ratio compares whole calls; it is no kernel's target."""
    lines = [
        f"under {GPU_BOUND_BYTES >> 20} MB moved, a call is mostly the host's: microseconds a call, host / GPU",
        f"{'case':<{width}} {'ours host':>10} {'ours GPU':>9} {'torch host':>11} {'torch GPU':>10} "
        f"{'ours/torch':>10}  check",
    ]
    for row in rows:
        speedup = "wrong" if row.wrong else f"{row.speedup:.2f}x"
        lines.append(
            f"{row.name:<{width}} {row.ours.host_ms * 1e3:>10.1f} {row.ours.gpu_ms * 1e3:>9.1f} "
            f"{row.baseline.host_ms * 1e3:>11.1f} {row.baseline.gpu_ms * 1e3:>10.1f} {speedup:>10}  {_check_text(row)}"
        )
    return lines


def plot_gbs(rows: list[Row], path: str | None = None):
    """GB/s against D for ours and torch, with the copy ceiling as a line; saved to `path`
    when given. Returns the figure, or None where matplotlib is not installed."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    points = sorted((r for r in rows if r.d is not None), key=lambda r: r.d)
    figure, axes = plt.subplots(figsize=(7, 4))
    axes.plot([r.d for r in points], [r.ours_gbs for r in points], "o-", label="ours")
    axes.plot([r.d for r in points], [r.baseline_gbs for r in points], "s--", label="torch")
    wrong = [r for r in points if r.wrong]
    if wrong:
        axes.plot([r.d for r in wrong], [r.ours_gbs for r in wrong], "rx", markersize=12, label="ours, wrong")
    ceilings = {r.ceiling_gbs for r in rows if r.ceiling_gbs}
    if ceilings:
        axes.axhline(max(ceilings), color="gray", linestyle=":", label="copy ceiling")
    axes.set_xscale("log", base=2)
    axes.set_xlabel("D")
    axes.set_ylabel("GB/s")
    axes.set_title(f"{device_name()}, torch {torch.__version__}")
    axes.legend()
    if path:
        figure.savefig(path, bbox_inches="tight")
    return figure


def target_lines(targets: list[tuple[str, bool]]) -> list[str]:
    """A bench's targets, (what, met), as the lines that end its report."""
    return [f"  {'met   ' if met else 'MISSED'} {text}" for text, met in targets]


def report(tables: list[str], targets: list[tuple[str, bool]], markdown: str | None = None) -> None:
    """Print a bench's tables and its targets, each met or missed; also as markdown to a file."""
    lines = target_lines(targets)
    print("\n\n".join(tables) + "\n\n" + "\n".join(lines))
    if markdown:
        write_markdown(markdown, tables, lines)


def write_markdown(path: str, tables: list[str], lines: list[str]) -> None:
    """A bench's tables and closing lines (its targets) as one code block, for docs/performance.md."""
    with open(path, "w") as handle:
        handle.write("```\n" + "\n\n".join(tables) + "\n\n" + "\n".join(lines) + "\n```\n")
