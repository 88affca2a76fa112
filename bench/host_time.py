"""Host time of small GPU calls, compared in groups: what a host-bound call spends before its
kernels run.

Each group's calls are timed in turn, the order reversed every round, so that the host's
drift (this is what a host-bound call measures) falls on every call of a group alike. A sleep
kernel keeps the GPU busy while a call is timed, so no call waits on the GPU: what is timed is
the host's work (time.perf_counter around the call). Each line gives the median and the 20th
and 80th percentiles, and the group's last call (the baseline) over this one.
"""

import statistics
import time

import torch


def interleaved_us(calls: dict, reps: int) -> dict:
    """Host microseconds of each call: every call once a round, the order reversed each round."""
    for call in calls.values():
        for _ in range(20):
            call()
    torch.cuda.synchronize()
    names = list(calls)
    times = {name: [] for name in names}
    for rep in range(reps):
        for name in names if rep % 2 == 0 else reversed(names):
            torch.cuda._sleep(3_000_000)  # the GPU stays busy: what is left is the host's time
            start = time.perf_counter()
            calls[name]()
            times[name].append((time.perf_counter() - start) * 1e6)
            torch.cuda.synchronize()
    return times


def print_groups(prefix: str, groups: dict, reps: int) -> None:
    """Each group ({title: {call name: call}}) timed and printed, its last call the baseline."""
    for title, calls in groups.items():
        print(f"{prefix} {title}")
        times = interleaved_us(calls, reps)
        last = statistics.median(times[list(calls)[-1]])
        for call, values in times.items():
            values.sort()
            median = statistics.median(values)
            print(
                f"  {call:50} {median:7.1f} ({values[len(values) // 5]:6.1f}-"
                f"{values[4 * len(values) // 5]:6.1f})  {last / median:5.2f}"
            )
