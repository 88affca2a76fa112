"""day03's saved-statistics case follows what autograd saved, not only how often forward ran:
backward must take the mean and rstd forward returned from ctx.saved_tensors. The compiled
extension is stood in for by torch, no build."""

import types

import pytest
import torch

from course.public import run_case
from course.spec import units

SPEC = units.load("day03_layernorm_backward").tests()
CASE = next(c for c in SPEC.CASES if c.name == "cpu_saved_statistics")


def _compiled() -> types.SimpleNamespace:
    def forward(x, gamma, beta, eps):
        mean = x.mean(dim=1)
        rstd = torch.rsqrt(x.var(dim=1, unbiased=False) + eps)
        return (x - mean[:, None]) * rstd[:, None] * gamma + beta, mean, rstd

    def backward(dy, x, gamma, mean, rstd, output_mask=(True, True, True)):
        xhat = (x - mean[:, None]) * rstd[:, None]
        g = dy * gamma
        dx = rstd[:, None] * (g - g.mean(dim=1, keepdim=True) - xhat * (g * xhat).mean(dim=1, keepdim=True))
        return dx, (dy * xhat).sum(0), dy.sum(0)

    return types.SimpleNamespace(forward=forward, backward=backward)


def _submission(keep, fetch) -> types.SimpleNamespace:
    """layernorm.py with forward's tensors kept by keep(ctx, x, gamma, mean, rstd) and found
    again in backward by fetch(ctx, ext) -> (x, gamma, mean, rstd)."""
    ext = types.SimpleNamespace(_ext=_compiled())

    class LayerNormFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, gamma, beta, eps):
            y, mean, rstd = ext._ext.forward(x, gamma, beta, eps)
            ctx.eps = eps
            keep(ctx, x, gamma, mean, rstd)
            return y

        @staticmethod
        def backward(ctx, dy):
            x, gamma, mean, rstd = fetch(ctx, ext)
            dx, dgamma, dbeta = ext._ext.backward(dy, x, gamma, mean, rstd)
            return dx, dgamma, dbeta, None

    ext.layer_norm = lambda x, gamma, beta, eps=1e-5: LayerNormFunction.apply(x, gamma, beta, eps)
    return ext


STATISTICS = {}  # the dict trick's: id(ctx) -> (mean, rstd)


def _in_a_dict(ctx, x, gamma, mean, rstd):
    ctx.save_for_backward(x, gamma)
    STATISTICS[id(ctx)] = (mean, rstd)


def _run_again(ctx, ext):
    x, gamma = ctx.saved_tensors
    _, mean, rstd = ext._ext.forward(x, gamma, torch.zeros_like(gamma), ctx.eps)
    return x, gamma, mean, rstd


SUBMISSIONS = {
    "saved": (lambda ctx, *tensors: ctx.save_for_backward(*tensors), lambda ctx, ext: ctx.saved_tensors),
    "in_a_dict": (_in_a_dict, lambda ctx, ext: (*ctx.saved_tensors, *STATISTICS[id(ctx)])),
    "on_ctx": (
        lambda ctx, x, gamma, mean, rstd: (ctx.save_for_backward(x, gamma), setattr(ctx, "stats", (mean, rstd))),
        lambda ctx, ext: (*ctx.saved_tensors, *ctx.stats),
    ),
    "run_again": (lambda ctx, x, gamma, mean, rstd: ctx.save_for_backward(x, gamma), _run_again),
}


def test_statistics_saved_for_backward_pass():
    verdict = run_case(SPEC, _submission(*SUBMISSIONS["saved"]), CASE, seed=2)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("kept", ["in_a_dict", "on_ctx"])
def test_statistics_kept_elsewhere_lose_though_forward_ran_once(kept):
    verdict = run_case(SPEC, _submission(*SUBMISSIONS[kept]), CASE, seed=2)
    assert not verdict.passed
    assert "mean and rstd read from ctx.saved_tensors" in verdict.message


def test_forward_run_again_in_backward_loses():
    verdict = run_case(SPEC, _submission(*SUBMISSIONS["run_again"]), CASE, seed=2)
    assert not verdict.passed and "forward calls" in verdict.message
