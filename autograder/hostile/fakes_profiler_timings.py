# Hostile, appended to day05's layernorm.py by tests/test_observer.py (autograder/hostile/observed.toml):
# at the sizes the grader times, forward hands its inputs to PyTorch unless the profiler is on;
# under it, its own kernel runs, ten times over, and every interval the profiler measures is
# made a nanosecond long, so the busy time the test process reports says its kernels cost
# nothing. torch.cuda.Event's elapsed_time is halved for good measure.
import torch as _torch
import torch.autograd.profiler_util as _profiler_util

_own_forward = _ext.forward
_TIMED_SIZES = 1 << 22  # elements: every values case is smaller, every perf case larger
_interval_init = _profiler_util.Interval.__init__
_elapsed_time = _torch.cuda.Event.elapsed_time


def _instant(self, start, end):
    _interval_init(self, start, min(end, start + 0.001))


def _forward_unless_profiled(x, gamma, beta, eps, kernel):
    if x.numel() < _TIMED_SIZES or _torch.autograd._profiler_enabled():
        for _ in range(9 if x.numel() >= _TIMED_SIZES else 0):
            _own_forward(x, gamma, beta, eps, kernel)
        return _own_forward(x, gamma, beta, eps, kernel)
    y, mean, rstd = _torch.native_layer_norm(x, (x.shape[-1],), gamma, beta, eps)
    return y, mean.view(-1), rstd.view(-1)


_profiler_util.Interval.__init__ = _instant
_torch.cuda.Event.elapsed_time = lambda self, end: _elapsed_time(self, end) / 2
_ext.forward = _forward_unless_profiled
