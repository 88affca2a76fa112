"""Vector add in Triton: out = x + y.

One program (Triton's word for a block of threads) adds BLOCK_SIZE consecutive elements;
the grid holds ceil(n / BLOCK_SIZE) programs, and the last one masks off what lies past n.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pass  # TODO(day08): this program's offsets, a mask for the tail, load x and y, store x + y


def _check(x: torch.Tensor, y: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError("vector_add: x and y must be tensors")
    if not x.is_cuda:
        raise ValueError(f"vector_add: x must be a CUDA tensor (Triton runs on the GPU), got one on {x.device}")
    if y.device != x.device:
        raise ValueError(f"vector_add: y must be on x's device {x.device}, got {y.device}")
    if y.shape != x.shape:
        raise ValueError(f"vector_add: y must have x's shape {tuple(x.shape)}, got {tuple(y.shape)}")
    if y.dtype != x.dtype:
        raise ValueError(f"vector_add: y must have x's dtype {x.dtype}, got {y.dtype}")


def vector_add(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    """x + y, elementwise, for tensors of the same shape, dtype and GPU (any layout)."""
    _check(x, y)
    x, y = x.contiguous(), y.contiguous()  # the kernel walks memory in order
    out = torch.empty_like(x)
    n = x.numel()
    raise NotImplementedError("TODO(day08): vector_add.py, vector_add: launch add_kernel over the n elements, "
                              "its grid enough programs to cover them (a grid of no programs cannot be launched: n "
                              "may be 0), with BLOCK_SIZE=block_size and a num_warps of your choice; block_size's "
                              "default, a power of two, is yours too (the tests use it); then write add_kernel's "
                              "body")
    return out
