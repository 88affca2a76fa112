"""day01 ReLU with a bias: what is correct, and the cases that check it.

relu_bias(x [M, N], bias [N]) -> y [M, N],   y = max(0, x + bias)

A case's inputs name what it runs ("op"):
- forward: the op's y;
- gradients: (grad_x, grad_bias) from autograd, for an upstream gradient grad_y;
- gradcheck: torch.autograd.gradcheck's test that the backward agrees with the forward: the
  op returns its outputs at nudged inputs and its backward's Jacobian (course.ops.jacobian_probe),
  and the judge compares the two Jacobians.
"""
import torch

from course.cases import INPUTS_UNCHANGED, OWN_KERNEL, POISON, ROTATED, SIDE_STREAM, Case, standard_normal
from course.hints import model_reading
from course.ops import Op, dtypes_like, gradcheck_op, gradients, jacobian_probe

from ..common.error_cases import error_case, spoil
from ..common.layouts import LAYOUTS  # NaN fills the gaps: a kernel that ignores strides reads them

UNIT = "day01_relu_bias"
# Base (atol, rtol) by dtype. y is x + bias rounded once to the dtype (relative error
# at most 2^-24 in fp32, 2^-11 in fp16, 2^-8 in bf16); each rtol allows twice that or more.
TOLERANCES = {
    torch.float32: (1e-6, 1e-6),
    torch.float64: (1e-12, 1e-12),
    torch.float16: (1e-5, 1e-3),
    torch.bfloat16: (1e-4, 8e-3),
}
# grad_bias is a sum over M rows, accumulated in float32 (float64 for fp64). Its rounding
# error grows with the sum of |grad| down a column; allow this many roundings of that.
SUM_ROUNDINGS = 32


def make_inputs(case, generator):
    p = case.params
    op, dtype = p.get("op", "forward"), p.get("dtype", torch.float32)
    rows, cols = p["shape"]
    x = standard_normal((rows, cols), generator, dtype)
    bias = standard_normal(cols, generator, dtype)
    if op == "gradcheck":
        # gradcheck differentiates by finite differences: keep x + bias away from the
        # kink at 0, where the ReLU has no derivative.
        x = torch.where((x + bias).abs() < 0.05, x + 0.1, x)
    inputs = {"op": op, "x": x.to(dtype), "bias": bias.to(dtype)}
    if op == "gradients":
        inputs["grad_y"] = standard_normal((rows, cols), generator, dtype).to(dtype)
    return inputs


def on_device(case, inputs):
    """Strided layouts and spoiled arguments are made here, where the op will see them."""
    p = case.params
    if "layout" in p:
        inputs["x"] = LAYOUTS[p["layout"]](inputs["x"])
    if "bias_layout" in p:
        inputs["bias"] = LAYOUTS[p["bias_layout"]](inputs["bias"])
    return spoil(case, inputs)


def _refusing_todo(run):
    """`run` as an op's call. `ext` is the unit's entry module, relu_bias.py."""
    def call(ext, inputs):
        try:
            return run(ext, inputs)
        except RuntimeError as error:
            # An unfinished op refuses every call with its TODO list; in an error case that
            # must not pass for having checked the argument.
            if "TODO(" in str(error) and not isinstance(error, NotImplementedError):
                raise NotImplementedError(str(error)) from None
            raise
    return call


def _forward(ext, inputs):
    return ext.relu_bias(inputs["x"], inputs["bias"])


def _gradients(ext, inputs):
    return gradients(ext.relu_bias, inputs, ("x", "bias"), "grad_y")


GRADCHECK_INPUTS = ("x", "bias")  # what gradcheck nudges and differentiates for


def _gradcheck(ext, inputs):
    return jacobian_probe(ext.relu_bias, inputs, GRADCHECK_INPUTS)


def _pre_activation(inputs):
    # Rounding x + bias to the dtype never changes its sign, so this mask is the op's too.
    return inputs["x"].double() + inputs["bias"].double()


def _forward_reference(inputs):
    return (_pre_activation(inputs).clamp_min(0),)


def _gradients_reference(inputs):
    grad_x = inputs["grad_y"].double() * (_pre_activation(inputs) > 0)
    return grad_x, grad_x.sum(dim=0)


def _tolerance(inputs):
    return TOLERANCES[inputs["x"].dtype]


def _gradients_tolerance(inputs):
    atol, rtol = _tolerance(inputs)
    if inputs["grad_y"].numel():
        accumulate = torch.float64 if inputs["x"].dtype == torch.float64 else torch.float32
        column_sums = inputs["grad_y"].double().abs().sum(dim=0)
        atol += SUM_ROUNDINGS * torch.finfo(accumulate).eps * column_sums.max().item()
    return atol, rtol


# ---- what a wrong output says: the usual slips, as models of the output they give ----
# (course.hints.model_reading names the one a wrong output follows)

def _forward_slips(name, inputs):
    x, bias = inputs["x"].double(), inputs["bias"].double()
    by_row = torch.full_like(x, float("nan"))  # bias[row] past bias's end reads other memory: no claim there
    known = min(x.shape[0], bias.numel())
    by_row[:known] = (x[:known] + bias[:known, None]).clamp_min(0)
    return {
        "y matches max(0, x) + bias: the ReLU is applied before the bias is added": x.clamp_min(0) + bias,
        "y matches max(0, x + bias[row]): bias is indexed by the row, not by the column": by_row,
    }


def _gradient_slips(name, inputs):
    grad_y = inputs["grad_y"].double()
    if name == "grad_x":
        return {"grad_x equals grad_y also where x + bias <= 0: the backward does not apply the ReLU's mask": grad_y}
    return {"grad_bias matches grad_y summed over the rows: it is summed before the ReLU's mask is applied, "
            "not from grad_x": grad_y.sum(dim=0)}


def _mask_elsewhere(name, got, inputs):
    """grad_x is grad_y or 0 everywhere, as a ReLU's backward gives, but not where x + bias > 0."""
    if name != "grad_x" or not got.numel():
        return []
    grad_y, got = inputs["grad_y"].double(), got.double()
    atol, rtol = _gradients_tolerance(inputs)
    passed = (got - grad_y).abs() <= atol + rtol * grad_y.abs()
    masked = got.abs() <= atol
    telling = grad_y.abs() > 2 * atol  # where grad_y is about 0 either reading fits
    if not (passed | masked).all():
        return []
    differ = (passed != (_pre_activation(inputs) > 0)) & telling
    if not differ.any():
        return []
    return [f"grad_x is grad_y or 0 at every element, as a ReLU's backward gives, but at {int(differ.sum())} "
            "elements where it passes grad_y is not where x + bias > 0: check the values the backward takes "
            "its mask from (what the forward saved)"]


def _read_gradients(name, got, inputs):
    return _model_gradients(name, got, inputs) or _mask_elsewhere(name, got, inputs)


_model_gradients = model_reading(_gradient_slips, _gradients_reference, ("grad_x", "grad_bias"), _gradients_tolerance)

OPS = {
    "forward": Op(_refusing_todo(_forward), _forward_reference, ("y",), dtypes_like("x"), _tolerance,
                  diagnose=model_reading(_forward_slips, _forward_reference, ("y",), _tolerance)),
    "gradients": Op(_refusing_todo(_gradients), _gradients_reference, ("grad_x", "grad_bias"),
                    dtypes_like("x", 2), _gradients_tolerance, diagnose=_read_gradients),
    "gradcheck": gradcheck_op(_refusing_todo(_gradcheck), GRADCHECK_INPUTS),
}


def _values(name, device, shape, dtype=torch.float32, points=1.0, checks=(INPUTS_UNCHANGED,), hint="", **params):
    return Case(name, f"{device}_values", device, points, dict(shape=shape, dtype=dtype, **params),
                checks=checks, hint=hint)


def _gradients_case(name, device, shape, dtype=torch.float32, **params):
    return Case(name, f"{device}_gradients", device, 1.0, dict(shape=shape, dtype=dtype, op="gradients", **params),
                checks=(INPUTS_UNCHANGED,), hint=GRADIENT_HINT)


def _gradcheck_case(name, device, shape=(3, 32)):
    # N = 32 fills whole blocks of columns: gradcheck calls the op hundreds of times, and its
    # verdict must not hang on the race a missing bounds check causes (the tail cases catch that).
    return Case(name, f"{device}_gradients", device, 1.0, dict(shape=shape, dtype=torch.float64, op="gradcheck"),
                hint="torch.autograd.gradcheck(relu_bias, (x, bias)) on small float64 inputs with "
                     "requires_grad=True prints the numerical and your analytical Jacobians")


def _error(name, words, device="cpu", **bad):
    return error_case(name, words, "check every argument in check_inputs with TORCH_CHECK and name it",
                      ("x", "bias"), device, shape=(4, 48), bad=bad)


TAIL_HINT = "N is not a multiple of the block's 32 columns: does every thread check col < N first?"
STRIDE_HINT = "x is not contiguous here: index through the accessor (x[row][col]), never data_ptr()[row * N + col]"
GRADIENT_HINT = "grad_x = grad_y where y > 0, else 0; grad_bias = grad_x summed over the rows (dim 0)"

CASES = [
    _values("cpu_fp64_small", "cpu", (4, 64), torch.float64),
    _values("cpu_fp32_tail", "cpu", (8, 100)),
    _values("cpu_fp32_transposed", "cpu", (16, 40), layout="transposed", hint=STRIDE_HINT),
    _values("cuda_fp32_small", "cuda", (16, 128)),
    _values("cuda_fp32_tail", "cuda", (33, 1000), hint=TAIL_HINT),
    _values("cuda_fp16_tail", "cuda", (33, 1000), torch.float16, hint=TAIL_HINT),
    _values("cuda_fp32_transposed", "cuda", (64, 300), layout="transposed", hint=STRIDE_HINT),
    _gradients_case("cpu_gradients_fp32", "cpu", (8, 100)),
    _gradients_case("cuda_gradients_fp32", "cuda", (33, 1000)),
    _gradcheck_case("cpu_gradcheck_fp64", "cpu"),
    _error("error_bias_shape", ("bias",), bias=lambda b: b[:-1]),
]
