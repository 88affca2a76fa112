"""Timing GPU ops honestly: CUDA events, warm-up, an L2 flush before every timed
call, inputs rotated so nothing is served from cache, median and spread reported."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch


@dataclass
class Timing:
    median_ms: float
    spread: float  # (p80 - p20) / median
    reps: int

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


def time_op(fn, arg_sets: list[tuple], warmup: int = 3, min_reps: int = 10, max_reps: int = 200,
            budget_s: float = 1.0, target_spread: float = 0.05) -> Timing:
    """Time fn(*args) over rotating arg_sets until the spread is small or the budget is spent."""
    for index in range(warmup):
        fn(*arg_sets[index % len(arg_sets)])
    torch.cuda.synchronize()
    times: list[float] = []
    spent = 0.0
    while len(times) < max_reps:
        args = arg_sets[len(times) % len(arg_sets)]
        flush_l2()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
        spent += times[-1] / 1e3
        if len(times) >= min_reps:
            spread = _spread(times)
            if spread < target_spread or spent > budget_s:
                break
    return Timing(statistics.median(times), _spread(times), len(times))


def _spread(times: list[float]) -> float:
    ordered = sorted(times)
    low, high = ordered[len(ordered) // 5], ordered[(4 * len(ordered)) // 5]
    return (high - low) / statistics.median(ordered)


def copy_ceiling_gbs(nbytes: int = 512 << 20) -> float:
    """The device's practical memory bandwidth: a large device-to-device copy, bytes read + written."""
    source = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    timing = time_op(lambda: target.copy_(source), [()], min_reps=10, max_reps=50)
    del source, target
    return timing.gbs(2 * nbytes)
