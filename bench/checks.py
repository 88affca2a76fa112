"""What a bench checks of the outputs it timed: each within an allowance of the baseline's,
relative to 1 + |expected| (near zero an absolute one), with a looser allowance for 16-bit
dtypes than for float32."""

import torch


def close(got: torch.Tensor, expected: torch.Tensor, dtype, sixteen_bit: float, float32: float) -> str:
    """'' when `got` is within the allowance for `dtype` of `expected`; else its largest error."""
    allowed = float32 if dtype == torch.float32 else sixteen_bit
    error = ((got.float() - expected.float()).abs() / (1 + expected.float().abs())).max().item()
    return "" if error <= allowed else f"max relative error {error:.3g}"
