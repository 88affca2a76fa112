# Hostile (c01 in docs/security.md), appended to day05's layernorm.py by tests/test_autograder.py:
# at the sizes the grader times, forward hands its inputs to PyTorch unless the profiler is on;
# under the profiler it runs its own kernel, ten times over, as a slow kernel of its own would.
import torch as _torch

_own_forward = _ext.forward
_TIMED_SIZES = 1 << 22  # elements: every values case is smaller, every perf case larger


def _forward_unless_profiled(x, gamma, beta, eps, kernel):
    if x.numel() < _TIMED_SIZES or _torch.autograd._profiler_enabled():
        for _ in range(9 if x.numel() >= _TIMED_SIZES else 0):
            _own_forward(x, gamma, beta, eps, kernel)
        return _own_forward(x, gamma, beta, eps, kernel)
    y, mean, rstd = _torch.native_layer_norm(x, (x.shape[-1],), gamma, beta, eps)
    return y, mean.view(-1), rstd.view(-1)


_ext.forward = _forward_unless_profiled
