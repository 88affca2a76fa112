"""Colab's T4, as far as a larger GPU can play it: each unit's reference built as Turing code
only (sm_75 and compute_75 PTX, which the driver compiles for this GPU at load) passes its
GPU cases; and day05's fused backward, built with a T4's 64 KB of shared memory a block,
launches the T4's plans: no block over 64 KB, rows over 7680 split over several blocks."""

import json
import os
import shutil
import subprocess

import pytest
import torch
from helpers import load_spec

from course.harness import to_device
from course.loading import build_and_load
from course.ops import call
from course.public import run_case
from course.sanitize import SANITIZER
from course.spec import units

pytestmark = pytest.mark.gpu

TURING_ARCH_LIST = "7.5+PTX"
T4_SHARED_BYTES = 65536  # cudaDevAttrMaxSharedMemoryPerBlockOptin on sm_75
UNITS = [u for u in units.all_units() if u.has_tests()]
PERF_UNIT = "day05_layernorm_performance"

_built = {}


def turing_build(name: str, root: str):
    """(module, library path) of unit `name`'s solution built for Turing alone."""
    if name not in _built:
        unit = units.load(name)
        source_dir = os.path.join(root, name, "turing", "src")
        build_dir = os.path.join(root, name, "turing", "build")
        unit.write("solution", source_dir)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TORCH_CUDA_ARCH_LIST", TURING_ARCH_LIST)
            module, _ = build_and_load(
                unit.plan(),
                source_dir,
                build_dir,
                extra_cuda_cflags=[f"-DLAYERNORM_MAX_SHARED_BYTES={T4_SHARED_BYTES}"],
            )
        _built[name] = module, os.path.join(build_dir, name + ".so")
    return _built[name]


def _gpu_cases():
    for unit in UNITS:
        for case in load_spec(unit.name).CASES:
            if case.device == "cuda" and case.kind not in ("perf", SANITIZER):  # timings, tools: not what this tests
                # one worker builds each unit (under pytest-xdist's --dist loadgroup)
                yield pytest.param(
                    unit,
                    case,
                    id=f"{unit.name}:{case.name}",
                    marks=[getattr(pytest.mark, unit.day), pytest.mark.xdist_group(unit.name)],
                )


@pytest.mark.parametrize("unit, case", list(_gpu_cases()))
def test_turing_build_passes(unit, case, build_root):
    module, _ = turing_build(unit.name, build_root)
    verdict = run_case(load_spec(unit.name), module, case, seed=1234)
    assert verdict.passed, verdict.message


@pytest.mark.xdist_group(PERF_UNIT)
@pytest.mark.parametrize("unit", [u for u in UNITS if u.name == PERF_UNIT], ids=lambda u: u.name)
def test_turing_build_holds_turing_code_only(unit, build_root, nvcc):
    """sm_75 machine code and PTX, nothing else: machine code for this GPU would be loaded
    in the PTX's place, and the PTX would never run."""
    _, library = turing_build(unit.name, build_root)
    from torch.utils.cpp_extension import CUDA_HOME

    places = [os.path.join(CUDA_HOME or "", "bin", "cuobjdump"), os.path.join(os.path.dirname(nvcc), "cuobjdump")]
    cuobjdump = next((p for p in places if os.path.exists(p)), None) or shutil.which("cuobjdump")
    if cuobjdump is None:
        pytest.skip("cuobjdump not found")

    def listed(what: str) -> list[str]:  # "ELF file    1: layernorm_forward.sm_75.cubin"
        out = subprocess.run([cuobjdump, f"--list-{what}", library], capture_output=True, text=True).stdout
        return [line.split()[-1] for line in out.splitlines() if line.strip()]

    machine_code, ptx = listed("elf"), listed("ptx")
    assert machine_code and all(".sm_75." in name for name in machine_code), machine_code
    assert len(ptx) == len(machine_code) and all(".sm_75." in name for name in ptx), ptx


# (dtype, rows, cols, kernel on a T4). The fused kernel's running sums take 8 bytes a column of
# each row in its block; a T4 leaves it 65280 (64 KB less 256 of its own for the row sums).
T4_PLANS = [
    (torch.float32, 64, 7680, "fused"),  # 480 threads x 16 columns: 61440 bytes
    (torch.float32, 64, 7684, "fused"),  # one block would need 65536 bytes: two blocks of 256 threads
    (torch.float16, 64, 7680, "fused"),
    (torch.float16, 64, 8192, "fused"),  # split likewise
    (torch.bfloat16, 40, 12288, "fused"),  # the wide plan (384 threads x 32 columns) would need 98304
    (torch.float32, 64, 7683, "version 1"),  # not whole vectors: version 1 at any length over 32
    (torch.float32, 4096, 1024, "fused"),  # short rows: 8 of them to a block would need 65536
    (torch.bfloat16, 70000, 64, "fused"),
]
KERNELS = {"fused": "layernorm_backward_fused_kernel", "version 1": "layernorm_backward_dx_kernel"}


def _kernel_launches(call, trace_path):
    """[(name, args)] of the CUDA kernels `call` launched, from the profiler's trace."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(trace_path))
    with open(trace_path) as handle:
        events = json.load(handle)["traceEvents"]
    return [(e["name"], e.get("args", {})) for e in events if e.get("cat") == "kernel"]


@pytest.mark.xdist_group(PERF_UNIT)
@pytest.mark.parametrize(
    "dtype, rows, cols, expected", T4_PLANS, ids=[f"{str(d)[6:]}_{r}x{c}" for d, r, c, _ in T4_PLANS]
)
def test_fused_backward_takes_the_t4_plan(dtype, rows, cols, expected, build_root, tmp_path):
    spec = load_spec(PERF_UNIT)
    module, _ = turing_build(PERF_UNIT, build_root)
    case = spec._backward("fused", f"t4_{cols}", (rows, cols), dtype)
    verdict = run_case(spec, module, case, seed=7)
    assert verdict.passed, verdict.message

    inputs = to_device(spec, case, spec.make_inputs(case, torch.Generator().manual_seed(7)))
    launches = _kernel_launches(lambda: call(spec, module, inputs), tmp_path / "trace.json")
    names = " ".join(name for name, _ in launches)
    assert KERNELS[expected] in names, names
    other = KERNELS["version 1" if expected == "fused" else "fused"]
    assert other not in names, names
    for name, args in launches:
        assert "shared memory" in args, f"the trace gives no shared memory for {name}: {sorted(args)}"
        assert args["shared memory"] <= T4_SHARED_BYTES, (name, args["shared memory"], args.get("block"))
