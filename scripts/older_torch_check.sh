#!/usr/bin/env bash
# The course against an older torch (default 2.4.1, the oldest supported), on a machine with
# or without a GPU: a venv with that torch, then every unit's tests here (references,
# templates, the kernels compiled for Turing and Hopper), the autograder's grading of each
# reference, and the Triton kernels compiled for Turing with that torch's Triton.
#
#   scripts/older_torch_check.sh [TORCH_VERSION] [pytest args]   (a -k of your own replaces the selection)
#
# This machine's nvcc may be newer than the CUDA that torch was built with (nvcc 13 against
# torch 2.4's CUDA 12.1), a pair torch's builder refuses: a sitecustomize in the venv lets it
# build. What this checks is our sources against the older torch's headers and Python API.
# Cases declared bf16 compile for Turing in the dtype a T4 runs them in with that torch's
# Triton: fp16 under Triton 3.2 and older, which cannot compile bf16 for sm_75 (course/dtypes.py).
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-2.4.1}"
shift || true
venv="${TMPDIR:-/tmp}/course-torch-$version"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  # setuptools 70.1 builds wheels without the `wheel` package (day07's build is a wheel).
  "$venv/bin/pip" install -q "torch==$version" "setuptools>=70.1" ninja numpy nbformat nbclient ipykernel \
    pyyaml pytest pytest-xdist
fi
site="$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')"
cat > "$site/sitecustomize.py" <<'PATCH'
# scripts/older_torch_check.sh: torch's builder may not refuse this machine's newer nvcc.
import importlib.abc
import importlib.util
import sys


class _AllowNewerNvcc(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch.utils.cpp_extension":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            module._check_cuda_version = lambda *args, **kwargs: None

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AllowNewerNvcc())
PATCH
export PATH="$venv/bin:$PATH"
if [ -z "${CUDA_HOME:-}" ] && [ -d /usr/local/cuda ]; then export CUDA_HOME=/usr/local/cuda; fi
workers="${PYTEST_WORKERS:-2}"
python -c 'import torch, triton; print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), triton {triton.__version__}")'
python -m pytest -q -n "$workers" -p no:cacheprovider tests/test_units.py tests/test_autograder.py tests/test_day08.py tests/test_day09.py \
  -k "test_units.py or test_reference_gets_full_marks or compile_for_turing" "$@"
