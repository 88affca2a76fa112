"""day03 LayerNorm backward: what is correct, and the cases that check it.

backward(dy [B, D], x [B, D], gamma [D], mean [B], rstd [B]) -> (dx [B, D], dgamma [D], dbeta [D])
layer_norm(x, gamma, beta, eps) -> y [B, D], differentiable (layernorm.py)

A case's inputs name what it runs ("op"):
- backward: the compiled op, on the mean and rstd given;
- rerun: the compiled op twice on the same inputs; the second run must give the same bits;
- layer_norm: the gradients of layer_norm, through autograd;
- gradcheck: torch.autograd.gradcheck's test of layer_norm in float64, judged from the raw data
  (course.ops.jacobian_probe);
- frozen_params: gamma and beta do not require grad: backward must return None for them;
- saved_stats: layer_norm's gradients while counting forward calls and watching what autograd
  saves (saved_tensors_hooks): forward runs once, and backward reads the mean and rstd it
  returned from ctx.saved_tensors, not from anywhere else.
Every op runs with torch.use_deterministic_algorithms(True), under which at::empty hands
out memory filled with NaN: a buffer that is read before it is written shows up as NaN.
"""

import torch

from course.cases import OWN_KERNEL, POISON, ROTATED, SIDE_STREAM
from course.harness import nan_filled
from course.hints import model_reading, one_strip
from course.ops import EXACT, Op, dtypes_like, gradcheck_op, gradients, jacobian_probe

from ..common.error_cases import error_case, spoil
from ..common.layernorm_tests import (EPS, GRADIENTS, autograd_gradients64, backward_slips, summed_terms, compiled_backward, formula_gradients,
                                      gradient_sizes, gradient_tolerance, random_affine, random_dy, random_x, rounding,
                                      saved_statistics, statistics, values_case)
from ..common.layouts import LAYOUTS

UNIT = "day03_layernorm_backward"
RERUN_OUTPUTS = GRADIENTS + tuple(f"{name} change on rerun" for name in GRADIENTS)
FROZEN_OUTPUTS = ("dx", "dgamma is None", "dbeta is None")
SAVED_OUTPUTS = ("dx", "forward calls", "mean and rstd read from ctx.saved_tensors")


def make_inputs(case, generator):
    p = case.params
    dtype, op = p.get("dtype", torch.float32), p.get("op", "backward")
    x = random_x(p, generator, dtype).to(dtype)
    gamma, beta = random_affine(p["shape"][1], generator, dtype)
    dy = random_dy(p["shape"], generator, dtype)
    if op in ("backward", "rerun"):
        mean, rstd = saved_statistics(x)  # as the forward would have saved them
        tensors = dict(dy=dy, x=x, gamma=gamma, mean=mean, rstd=rstd)
    elif op == "gradcheck":
        tensors = dict(x=x, gamma=gamma, beta=beta)
    else:
        tensors = dict(x=x, gamma=gamma, beta=beta, dy=dy)
    return {**{k: v.to(dtype) for k, v in tensors.items()}, "op": op, "eps": EPS}


def on_device(case, inputs):
    """Strided layouts and spoiled arguments are made here, where the op will see them."""
    if "dy_layout" in case.params:
        inputs["dy"] = LAYOUTS[case.params["dy_layout"]](inputs["dy"])
    return spoil(case, inputs)


# ---- the calls: `ext` is the unit's entry module, layernorm.py; ext._ext is the compiled extension ----

def _rerun(ext, inputs):
    first = compiled_backward(ext, inputs)
    second = compiled_backward(ext, inputs)
    return (*first, *(b - a for a, b in zip(first, second)))


def _layer_norm_of(ext, inputs):
    return lambda x, gamma, beta: ext.layer_norm(x, gamma, beta, inputs["eps"])


def _layer_norm(ext, inputs):
    return gradients(_layer_norm_of(ext, inputs), inputs, ("x", "gamma", "beta"), "dy")


GRADCHECK_INPUTS = ("x", "gamma", "beta")  # what gradcheck nudges and differentiates for


def _gradcheck(ext, inputs):
    return jacobian_probe(_layer_norm_of(ext, inputs), inputs, GRADCHECK_INPUTS)


def _frozen_params(ext, inputs):
    x = inputs["x"].detach().requires_grad_()  # a new leaf, same storage
    y = ext.layer_norm(x, inputs["gamma"], inputs["beta"], inputs["eps"])
    returned = []  # what LayerNormFunction.backward returned (autograd drops it otherwise)
    y.grad_fn.register_hook(lambda grads_from_backward, _: returned.append(grads_from_backward))
    (dx,) = torch.autograd.grad(y, x, inputs["dy"])
    _, dgamma, dbeta = returned[0]
    return dx, torch.tensor(dgamma is None), torch.tensor(dbeta is None)


class _SavedTensors:
    """What autograd saves for backward while it is on (saved_tensors_hooks), and which of
    those tensors backward read: a statistic kept anywhere else (a dict, an attribute of ctx)
    is not among them."""

    def __init__(self):
        self.packed, self.unpacked = [], set()
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    def _pack(self, tensor):
        self.packed.append(tensor)
        return len(self.packed) - 1

    def _unpack(self, index):
        self.unpacked.add(index)
        return self.packed[index]

    def read_in_backward(self, value) -> bool:
        """Whether backward read a saved tensor holding exactly `value`."""
        return any(
            self.packed[i].shape == value.shape and torch.equal(self.packed[i].detach().double(), value.double())
            for i in self.unpacked
        )


def _saved_stats(ext, inputs):
    compiled, calls = ext._ext, []
    forward = compiled.forward

    def counted_forward(*args):
        calls.append(forward(*args))
        return calls[-1]

    # Every name bound to the compiled forward counts, in the module and in the student's own
    # (`forward = _ext.forward` at import is as right as calling _ext.forward each time).
    bound = [(holder, name) for holder in (compiled, ext) for name, value in list(vars(holder).items())
             if value is forward]
    for holder, name in bound:
        setattr(holder, name, counted_forward)
    saved = _SavedTensors()
    try:
        with saved.hooks:
            dx, _, _ = _layer_norm(ext, inputs)
    finally:
        for holder, name in bound:
            setattr(holder, name, forward)
    # The first forward's mean and rstd (its outputs 1 and 2) must reach backward as saved tensors.
    read = bool(calls) and all(saved.read_in_backward(statistic.detach()) for statistic in calls[0][1:3])
    return dx, torch.tensor(len(calls)), torch.tensor(read)


# ---- what is right ----

def _from_formula(inputs):
    """The gradients of the mean and rstd given, by the formula in layernorm_backward.cu."""
    return formula_gradients(*(inputs[n].double() for n in ("dy", "x", "gamma", "mean", "rstd")))


def _from_autograd(inputs):
    """PyTorch's own float64 LayerNorm and autograd: a derivation independent of the formula."""
    return autograd_gradients64(inputs["x"], inputs["gamma"], inputs["beta"], inputs["dy"], inputs["eps"])


def _rerun_reference(inputs):
    dx, dgamma, dbeta = _from_formula(inputs)
    return dx, dgamma, dbeta, torch.zeros_like(dx), torch.zeros_like(dgamma), torch.zeros_like(dbeta)


def _gradient_tolerance(inputs):
    """{dx, dgamma, dbeta: (atol, rtol)}: ROUNDINGS roundings of the dtype times the size of what is
    rounded (common/layernorm_tests.py). Today's dtypes, float32 and float64, are the ones the
    sums run in: no output rounding. float32 sums land well inside; a dropped term, row or strip
    is off by far more."""
    x, dy, gamma = inputs["x"].double(), inputs["dy"].double(), inputs["gamma"].double()
    mean, rstd = ((inputs["mean"].double(), inputs["rstd"].double()) if "mean" in inputs
                  else statistics(x, inputs["eps"]))
    allowed = rounding(inputs["x"].dtype, output_roundings=0)
    return gradient_tolerance(gradient_sizes(dy, x, gamma, mean, rstd), allowed, allowed)


def _exact_but_gradients(names):
    """The tolerance of an op whose outputs `names` are gradients, flags and counts: none for the latter."""
    def tolerance(inputs):
        allowed = _gradient_tolerance(inputs)
        return {name: allowed.get(name, EXACT) for name in names}
    return tolerance


def _read(reference, outputs, tolerance):
    """The op's reading of its wrong gradients: the backward's usual slips (common/layernorm_tests.py),
    and a dgamma or dbeta summed over one strip of rows only."""
    slips = model_reading(backward_slips, reference, outputs, tolerance)

    def diagnose(name, got, inputs):
        terms = summed_terms(name, inputs)
        if terms is None or not terms.numel():
            return slips(name, got, inputs)
        return slips(name, got, inputs) or one_strip(name, got, terms, *tolerance(inputs)[name])
    return diagnose


def _frozen_reference(inputs):
    return _from_autograd(inputs)[0], torch.tensor(True), torch.tensor(True)


def _saved_reference(inputs):
    return _from_autograd(inputs)[0], torch.tensor(1), torch.tensor(True)


OPS = {
    "backward": Op(nan_filled(compiled_backward), _from_formula, GRADIENTS, dtypes_like("x", 3), _gradient_tolerance,
                   diagnose=_read(_from_formula, GRADIENTS, _gradient_tolerance)),
    "rerun": Op(nan_filled(_rerun), _rerun_reference, RERUN_OUTPUTS, dtypes_like("x", 6),
                _exact_but_gradients(RERUN_OUTPUTS),
                diagnose=_read(_rerun_reference, RERUN_OUTPUTS, _exact_but_gradients(RERUN_OUTPUTS))),
    "layer_norm": Op(nan_filled(_layer_norm), _from_autograd, GRADIENTS, dtypes_like("x", 3), _gradient_tolerance,
                     diagnose=_read(_from_autograd, GRADIENTS, _gradient_tolerance)),
    "gradcheck": gradcheck_op(nan_filled(_gradcheck), GRADCHECK_INPUTS),
    "frozen_params": Op(nan_filled(_frozen_params), _frozen_reference,
                        FROZEN_OUTPUTS, lambda inputs: (inputs["x"].dtype, torch.bool, torch.bool),
                        _exact_but_gradients(FROZEN_OUTPUTS), host_outputs=FROZEN_OUTPUTS[1:],
                        diagnose=_read(_frozen_reference, FROZEN_OUTPUTS, _exact_but_gradients(FROZEN_OUTPUTS))),
    "saved_stats": Op(nan_filled(_saved_stats), _saved_reference,
                      SAVED_OUTPUTS, lambda inputs: (inputs["x"].dtype, torch.int64, torch.bool),
                      _exact_but_gradients(SAVED_OUTPUTS), host_outputs=SAVED_OUTPUTS[1:],
                      diagnose=_read(_saved_reference, SAVED_OUTPUTS, _exact_but_gradients(SAVED_OUTPUTS))),
}


# What each op runs of the code students write ("file, function", as its TODO line names it), by
# path: a public test runs as soon as its own are written (course/todos.py), so the compiled
# backward before the autograd Function, the CPU before the kernels, the argument checks before
# the rest. layernorm.cpp's backward refuses while its own are unwritten, each kernel only where
# its outputs are asked for (frozen gamma and beta: dx's alone); forward, day02's, is given.
CHECKS = ("layernorm.cpp, check_backward_inputs",)
CPU_BACKWARD = CHECKS + ("layernorm.cpp, backward",)
CUDA_BACKWARD = CPU_BACKWARD + ("layernorm.cpp, backward_cuda",)
DX_KERNEL = ("layernorm_backward.cu, layernorm_backward_dx_kernel",)
PARAM_KERNELS = ("layernorm_backward.cu, param_partials_kernel", "layernorm_backward.cu, param_sums_kernel")
FUNCTION = ("layernorm.py, LayerNormFunction.forward", "layernorm.py, LayerNormFunction.backward")
BACKWARD = {"cpu": CPU_BACKWARD, "cuda": CUDA_BACKWARD + DX_KERNEL + PARAM_KERNELS}
THROUGH_AUTOGRAD = {path: FUNCTION + functions for path, functions in BACKWARD.items()}
FUNCTIONS_RUN = {
    "backward": BACKWARD,
    "rerun": BACKWARD,
    "backward errors": {"cpu": CHECKS, "cuda": CHECKS},
    "layer_norm": THROUGH_AUTOGRAD,
    "gradcheck": THROUGH_AUTOGRAD,
    "saved_stats": THROUGH_AUTOGRAD,
    "frozen_params": {"cpu": FUNCTION + CPU_BACKWARD, "cuda": FUNCTION + CUDA_BACKWARD + DX_KERNEL},
}


DX_HINT = "dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, both means over the row's D features"
PARAMS_HINT = ("dgamma = sum over all rows of dy * xhat, dbeta = sum of dy: does stage 1 take every row of its "
               "strip and stage 2 add every strip's partials?")
TAIL_HINT = ("B is not a multiple of the rows per strip, nor D of 32 or 256: does every loop stop at its bound "
             "(j < D, row < end_row, col < D)?")
RERUN_HINT = ("two runs on the same inputs gave different bits: atomicAdd adds in whatever order the blocks "
              "finish; add the partials in a fixed order instead")
STABLE_HINT = ("|mean| >> std here: compute xhat = (x - mean) * rstd as written; expanding it into "
               "x * rstd - mean * rstd cancels catastrophically")
STRIDE_HINT = "dy is not contiguous here: make it row-major in backward (dy.contiguous()) before reading it"
FROZEN_HINT = "pass ctx.needs_input_grad[:3] to _ext.backward as output_mask: it returns None for frozen gamma and beta"
SAVED_HINT = ("save mean and rstd in forward with ctx.save_for_backward and take them from ctx.saved_tensors in "
              "backward; backward must not run forward again")
GRADCHECK_HINT = ("torch.autograd.gradcheck(layer_norm, (x, gamma, beta)) on small float64 inputs with "
                  "requires_grad=True prints the numerical and your analytical Jacobians")


def _values(name, device, shape, dtype=torch.float32, op="backward", hint="", **params):
    return values_case(name, device, shape, dtype, hint=hint, op=op, **params)


def _gradients(name, device, shape, dtype=torch.float32, op="layer_norm", hint=DX_HINT):
    return values_case(name, device, shape, dtype, hint=hint, group="gradients", op=op)


def _gradcheck_case(name, device, shape):
    return values_case(name, device, shape, torch.float64, checks=(), hint=GRADCHECK_HINT, group="gradients",
                       op="gradcheck")


def _error(name, words, device="cpu", **bad):
    return error_case(name, words, "check every argument in check_backward_inputs and name it",
                      ("x", "dy", "gamma", "mean", "rstd"), device, op="backward", bad=bad)


CASES = [
    _values("cpu_fp64_small", "cpu", (4, 64), torch.float64, hint=DX_HINT),
    _values("cpu_fp32_tail", "cpu", (77, 100), hint=TAIL_HINT),
    _values("cuda_fp32_small", "cuda", (33, 333), hint=DX_HINT),
    _values("cuda_fp32_tail", "cuda", (77, 1000), hint=TAIL_HINT),
    _gradients("cpu_layer_norm_fp32", "cpu", (40, 96)),
    _gradients("cuda_layer_norm_fp32", "cuda", (100, 768)),
    _gradcheck_case("cpu_gradcheck_fp64", "cpu", (4, 6)),
    _gradients("cpu_frozen_params", "cpu", (8, 64), op="frozen_params", hint=FROZEN_HINT),
    _error("error_dy_shape", ("dy",), dy=lambda t: t[:, :-1]),
]
