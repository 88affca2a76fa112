"""The cases only the autograder runs: day04's edge catalogue through the operators, every
dtype on the GPU, the package's contract (opcheck, compile, state_dict, memory), and perf
through autograd in every dtype."""
from course.cases import FULL_AT, ZERO_AT
from course.sanitize import sanitizer_cases

from .public_tests import *  # the public suite: its ops, inputs and cases
from .public_tests import CASES as PUBLIC_CASES
from .public_tests import HINTS, PERF_NEEDS, PERF_SHAPE, _case, _error

FP16, BF16, FP32, FP64 = torch.float16, torch.bfloat16, torch.float32, torch.float64


def _perf(dtype, shape):
    short = {FP16: "fp16", BF16: "bf16", FP32: "fp32"}[dtype]
    return Case(f"cuda_perf_autograd_{short}_{shape[0]}x{shape[1]}", "cuda_perf", "cuda", 1.0,
                dict(op="perf", dtype=dtype, shape=shape, full_at=FULL_AT, zero_at=ZERO_AT), kind="perf",
                timeout=120.0, needs=PERF_NEEDS)


def _edges(device):
    """day04's catalogue, through the operator."""
    return [
        _case("forward_empty", device, "forward", (0, 64)),
        _case("backward_empty", device, "backward_op", (0, 64), checks=()),
        _case("forward_d1", device, "forward", (7, 1)),
        _case("forward_tail", device, "forward", (33, 1001)),
        _case("forward_one_row", device, "forward", (1, 4096)),
        _case("forward_4d", device, "forward", (2, 3, 4, 40)),
        _case("forward_large_mean", device, "forward", (16, 512), mean=1e4, std=1e-2),
        _case("forward_large_eps", device, "forward", (16, 256), eps=0.1, std=0.5),
        _case("forward_no_bias", device, "forward", (32, 128), affine="weight", hint=HINTS["weight_none"]),
        _case("forward_no_affine", device, "forward", (32, 128), affine="none", hint=HINTS["weight_none"]),
        _case("backward_no_weight", device, "backward_op", (32, 128), affine="none", checks=(),
              hint=HINTS["weight_none"]),
        _case("backward_many_rows", device, "backward_op", (5000, 64), checks=()),
        _case("backward_wide", device, "backward_op", (96, 1536), checks=()),
        _case("forward_many_rows", device, "forward", (3000, 96)),
        _case("autograd_3d", device, "autograd", (4, 9, 80), checks=()),
        _case("autograd_two_dims", device, "autograd", (6, 4, 24), normalized_shape=(4, 24), checks=()),
        _case("forward_transposed", device, "forward", (48, 64), layout="transposed"),
        _case("backward_transposed", device, "backward_op", (48, 64), layout="transposed", checks=()),
    ]


CASES = [
    *PUBLIC_CASES,
    *_edges("cpu"),
    _case("opcheck_no_affine", "cpu", "opcheck", (8, 32), affine="none", checks=(), group="package"),
    _case("opcheck_fp64_3d", "cpu", "opcheck", (2, 3, 16), FP64, checks=(), group="package"),
    _case("state_dict_one_dim", "cpu", "state_dict", (8, 48), checks=(), group="package"),
    *_edges("cuda"),
    *[_case(f"forward_{name}", "cuda", "forward", (300, 768), dtype) for name, dtype in
      (("fp16", FP16), ("fp32", FP32), ("fp64", FP64))],
    *[_case(f"backward_{name}", "cuda", "backward_op", (300, 768), dtype, checks=()) for name, dtype in
      (("fp16", FP16), ("bf16", BF16), ("fp64", FP64))],
    *[_case(f"autograd_{name}", "cuda", "autograd", (96, 512), dtype, checks=()) for name, dtype in
      (("fp16", FP16), ("bf16", BF16))],
    _case("autograd_misaligned", "cuda", "autograd", (64, 768), layout="misaligned", checks=()),
    _case("autograd_large", "cuda", "autograd", (300, 2048), checks=()),
    _case("opcheck_bf16", "cuda", "opcheck", (16, 256), BF16, checks=(), group="package"),
    _case("opcheck_fp32_no_affine", "cuda", "opcheck", (16, 100), affine="none", checks=(), group="package"),
    _case("state_dict_round_trip", "cuda", "state_dict", (8, 4, 16), normalized_shape=(4, 16), checks=(),
          group="package"),
    _case("memory", "cuda", "memory", (64, 256), checks=(), group="package"),
    # Not run where the grading machine shows one GPU (the report says so).
    Case("cuda1_on_inputs_gpu", "cuda1_package", "cuda:1", 1.0,
         dict(op="on_inputs_gpu", shape=(96, 768), dtype=FP32), hint=HINTS["on_inputs_gpu"]),
    _error("cpu_error_x_integer", ("x",), x=lambda x: x.round().to(torch.int32)),
    _error("cpu_error_weight_dtype", ("weight", "dtype"), gamma=lambda g: g.double()),
    _error("cpu_error_bias_shape", ("bias",), beta=lambda b: b[:-1]),
    _error("cpu_error_x_0d", ("x",), x=lambda x: x[0, 0]),
    _error("cuda_error_weight_on_cpu", ("weight",), device="cuda", gamma=lambda g: g.cpu()),
    # Twice fp32's rows, so as many bytes: the GPU's time, not the host's, decides here too.
    *[_perf(dtype, (2 * PERF_SHAPE[0], PERF_SHAPE[1])) for dtype in (FP16, BF16)],
    # compute-sanitizer over the small GPU cases, where the grader has it; torch.compile, opcheck
    # and the thousand-call memory test run no kernel of the package's that the others do not
    *sanitizer_cases(skip=("cuda_compiled_*", "cuda_opcheck_*", "cuda_memory")),
]
