"""Builds fast_layernorm._C: the operators' C++ registration and day 5's CUDA kernels.

    pip install --no-build-isolation -e .     # or: pip wheel --no-build-isolation .

Without a GPU to look at, the kernels are compiled for every GPU from the T4 (sm_75) to the
H100 (sm_90), plus PTX that newer GPUs compile when they load it. TORCH_CUDA_ARCH_LIST, when
set, names the GPUs instead (one is much faster to build: set it while you develop).
"""
import glob
import os

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "7.5;8.0;8.6;8.9;9.0+PTX")
# Written at every build, read by fast_layernorm/__init__.py at import: the torch this build's
# library was compiled against.
BUILD_INFO = os.path.join("fast_layernorm", "_build_info.py")


class BuildExtensionKeepingObjects(BuildExtension):
    """pip builds in a new temporary folder each time, so a one-line edit would recompile every
    file. With the objects kept in build/objects, ninja recompiles only the files that changed."""

    def finalize_options(self):
        super().finalize_options()
        self.build_temp = os.path.join("build", "objects")


def record_torch_version():
    """The compiled library calls torch's C++ functions by their exact signatures, which change
    between torch releases: the package's import compares this version with the torch it meets."""
    raise NotImplementedError("TODO(day07): setup.py, record_torch_version: write BUILD_INFO, a module that sets "
                              "TORCH_VERSION to the version of the torch this build runs with (torch.__version__)")


def extension():
    """fast_layernorm._C: every .cpp and .cu file of csrc/, in one library."""
    # No -std flag: BuildExtension picks the C++ standard the installed torch's headers need.
    # -fno-gnu-unique: g++ marks some template statics (those of an optional Tensor argument) as
    # unique across the process, and a library that has one can never be unloaded; without them a
    # rebuilt package can replace the old one in a running Python (the notebook's rebuild loop).
    # No fast math: LayerNorm's variance subtracts nearly equal numbers, and rsqrt's rounding
    # would show in fp32 outputs.
    raise NotImplementedError("TODO(day07): setup.py, extension: return CUDAExtension(\"fast_layernorm._C\", ...) "
                              "with sources every .cpp and .cu file of csrc/ (glob), and extra_compile_args "
                              "{\"cxx\": [\"-O3\", \"-fno-gnu-unique\"], \"nvcc\": [\"-O3\", \"-lineinfo\"]}")


def commands():
    """setup's cmdclass: which class runs each build step."""
    raise NotImplementedError("TODO(day07): setup.py, commands: return {\"build_ext\": ...}, the BuildExtension "
                              "subclass above: it runs nvcc on the .cu files and keeps the objects in build/")


record_torch_version()
setup(ext_modules=[extension()], cmdclass=commands())
