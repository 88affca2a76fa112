# Hostile: a wrong gradient, and every check Python could run in the test process patched to
# pass: torch's comparisons, gradcheck, and the course's judge and ops helpers.
import torch as _torch

_torch.allclose = lambda *args, **kwargs: True
_torch.equal = lambda *args, **kwargs: True
_torch.testing.assert_close = lambda *args, **kwargs: None
_torch.autograd.gradcheck = lambda *args, **kwargs: True
_torch.autograd.gradgradcheck = lambda *args, **kwargs: True
try:
    import course.judge as _judge

    _judge.judge = lambda *args, **kwargs: _judge.Verdict(True, "passed (patched)")
except Exception:
    pass
