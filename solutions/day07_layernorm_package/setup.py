"""Builds fast_layernorm._C: the operators' C++ registration and day 5's CUDA kernels.

    pip install --no-build-isolation -e .     # or: pip wheel --no-build-isolation .

Without a GPU to look at, the kernels are compiled for every GPU from the T4 (sm_75) to the
H100 (sm_90), plus PTX that newer GPUs compile when they load it. TORCH_CUDA_ARCH_LIST, when
set, names the GPUs instead (one is much faster to build: set it while you develop).
"""
import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "7.5;8.0;8.6;8.9;9.0+PTX")



class BuildExtensionKeepingObjects(BuildExtension):
    """pip builds in a new temporary folder each time, so a one-line edit would recompile every
    file. With the objects kept in build/objects, ninja recompiles only the files that changed."""

    def finalize_options(self):
        super().finalize_options()
        self.build_temp = os.path.join("build", "objects")


# No -std flag: BuildExtension picks the C++ standard the installed torch's headers need.
# -fno-gnu-unique: g++ marks some template statics (those of an optional Tensor argument) as
# unique across the process, and a library that has one can never be unloaded; without them a
# rebuilt package can replace the old one in a running Python (the notebook's rebuild loop).
# No fast math: LayerNorm's variance subtracts nearly equal numbers, and rsqrt's rounding
# would show in fp32 outputs.
setup(
    ext_modules=[
        CUDAExtension(
            "fast_layernorm._C",
            sources=sorted(glob.glob("csrc/*.cpp")) + sorted(glob.glob("csrc/*.cu")),
            extra_compile_args={"cxx": ["-O3", "-fno-gnu-unique"], "nvcc": ["-O3", "-lineinfo"]},
        )
    ],
    cmdclass={"build_ext": BuildExtensionKeepingObjects},
)
