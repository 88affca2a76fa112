"""day05's launch plans as the GPU makes them: each row length is planned once per process,
and what one plan asks of the GPU must not undo another's."""

import pytest
import torch
from helpers import built_unit

pytestmark = [pytest.mark.day05, pytest.mark.gpu]


def test_a_row_length_planned_after_another_leaves_its_launch_possible(build_root):
    """Each row length's backward plan is made once. Planning a shorter row must not take back
    the shared memory a longer one was allowed: fp32 rows of 12292 ask 100 KB a block, rows of
    8196 68 KB. The row lengths are used by no other test, so no earlier plan hides it."""
    module, _ = built_unit("day05_layernorm_performance", "solution", build_root)
    for cols in (12292, 8196, 12292):
        x = torch.randn(8, cols, device="cuda")
        gamma, beta = torch.rand(cols, device="cuda") + 0.5, torch.zeros(cols, device="cuda")
        _, mean, rstd = module._ext.forward(x, gamma, beta, 1e-5)
        dy = torch.randn_like(x)
        got = module._ext.backward(dy, x, gamma, mean, rstd)
        expected = torch.ops.aten.native_layer_norm_backward(
            dy, x, (cols,), mean[:, None], rstd[:, None], gamma, beta, (True, True, True)
        )
        for name, g, e in zip(("dx", "dgamma", "dbeta"), got, expected):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4, msg=lambda m: f"D = {cols}, {name}: {m}")
