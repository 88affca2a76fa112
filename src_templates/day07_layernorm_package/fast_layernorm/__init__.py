"""fast_layernorm: LayerNorm as PyTorch operators, run by day 5's CUDA kernels on the GPU.

    torch.ops.fast_layernorm.forward, .backward, .layer_norm    the operators (csrc/layernorm_ops.cpp)
    fast_layernorm.layer_norm(x, normalized_shape, weight, bias, eps)    like F.layer_norm (the operator)
    fast_layernorm.LayerNorm(normalized_shape, ...)                      like nn.LayerNorm
"""
import glob
import os

import torch

from ._build_info import TORCH_VERSION as BUILT_WITH  # written by setup.py at build time


def check_torch_version(built_with: str, running: str) -> None:
    """_C calls torch's C++ functions by their exact signatures, which change between torch's
    minor releases: under another torch it fails to load (an undefined symbol) or, worse, loads
    and misbehaves. Refuse with an ImportError that says what to do instead."""
    # Left to write, the check lets the import go on (every other test needs the import).
    import warnings

    warnings.warn("TODO(day07): fast_layernorm/__init__.py, check_torch_version: raise ImportError when built_with "
                  "and running differ in major.minor, naming both versions and saying to rebuild", stacklevel=2)


check_torch_version(BUILT_WITH, torch.__version__)  # before the library loads: that is what would crash
# The library holds no Python module: loading it registers torch.ops.fast_layernorm.
torch.ops.load_library(glob.glob(os.path.join(os.path.dirname(__file__), "_C*.so"))[0])

from .module import LayerNorm  # noqa: E402
from .ops import layer_norm  # noqa: E402

__all__ = ["LayerNorm", "layer_norm"]
