"""day04 LayerNorm edge cases: what is correct, and the cases that check it.

forward(x [..., D], normalized_shape, gamma [D], beta [D], eps) -> (y [..., D], mean [...], rstd [...])
backward(dy [..., D], x, gamma, mean, rstd, output_mask) -> (dx [..., D], dgamma [D], dbeta [D])
layer_norm(x, normalized_shape, gamma, beta, eps) -> y, differentiable (layernorm.py)

A case's inputs name what it runs ("op"):
- forward: the compiled forward; y, mean and rstd against float64;
- backward: the gradients of layer_norm through autograd against float64 F.layer_norm's;
- no_affine: layer_norm(x, D) with gamma and beta left out, as F.layer_norm allows;
- backward_op: the compiled backward called directly (its error cases);
- gradcheck: torch.autograd.gradcheck's test of layer_norm in float64, judged from the raw data
  (course/ops.py, gradcheck_op): graded in the hidden suite, and the lab's gradcheck (LAB_CASES);
- overflow_forward, overflow_backward: a 4 GiB fp16 x of B * D > 2^31 elements, built on the
  GPU from a small tile; only its last rows (and dgamma, dbeta) come back to be judged. The
  backward one calls the compiled backward on statistics the parent computed, with dy = x.
Every op runs under torch.use_deterministic_algorithms(True), which makes at::empty hand out
memory filled with NaN: an output element that is never written shows up as NaN.

Each edge case is its own test, forward and backward, on the CPU and on the GPU; the CPU path
runs the kernels' algorithms, so a machine without a GPU checks everything but the kernels.
"""

import torch

from course.cases import INPUTS_UNCHANGED, OWN_KERNEL, SIDE_STREAM, Case
from course.harness import nan_filled
from course.hints import model_reading, offset_wraps
from course.ops import Op, dtypes_like, gradcheck_op, gradients, jacobian_probe

from ..common.error_cases import error_case, spoil
from ..common.layernorm_tests import (CHECK_HINT, EPS, FORWARD_OUTPUTS, GRADIENTS, autograd_gradients64,
                                      backward_tolerance, compiled_backward, condition_by_std, dx_formula,
                                      forward_dtypes, forward_slips, forward_tolerance, layer_norm64, max_abs,
                                      random_affine, random_dy, random_x, saved_statistics, statistics, values_case)
from ..common.layouts import LAYOUTS
from ..common.tiled_rows import LAST_ROWS, TILE_ROWS, last_of, last_rows, random_tile, row_offsets, tiled_rows

UNIT = "day04_layernorm_edge_cases"

# The 32-bit overflow case: 32769 rows of 65536 fp16 = 4 GiB, and row 32768 starts at element
# 2^31. The parent sends a small tile; the GPU repeats it with a per-row offset (so that a read
# from any other row shows), and only the last rows come back (common/tiled_rows.py). The GPU
# holds x and an output of its size: 8 GiB.
OVERFLOW_ROWS, OVERFLOW_COLS = 32769, 65536
OVERFLOW_GPU_BYTES = 2 * OVERFLOW_ROWS * OVERFLOW_COLS * 2


def _overflow_inputs(inputs, generator):
    # small enough that dgamma, a sum over 32769 rows (dy = x), stays well below fp16's largest, 65504
    tile = random_tile(OVERFLOW_COLS, generator)
    inputs.update(tile=tile.to(torch.float16), rows=OVERFLOW_ROWS)
    if inputs["op"] == "overflow_backward":  # the statistics forward would save, so that backward alone is judged
        owner = torch.arange(OVERFLOW_ROWS) % TILE_ROWS
        tile_mean, tile_rstd = statistics(tile.double())
        inputs["mean"] = (tile_mean[owner] + row_offsets(OVERFLOW_ROWS)).float()
        inputs["rstd"] = tile_rstd[owner].float()
    return inputs


def make_inputs(case, generator):
    p = case.params
    op, dtype = p["op"], p.get("dtype", torch.float32)
    gamma_beta_cols = OVERFLOW_COLS if op.startswith("overflow") else p["shape"][-1]
    gamma, beta = random_affine(gamma_beta_cols, generator, dtype)
    inputs = {"op": op, "gamma": gamma.to(dtype), "beta": beta.to(dtype), "normalized_shape": gamma_beta_cols,
              "eps": p.get("eps", EPS)}
    if op.startswith("overflow"):
        return _overflow_inputs(inputs, generator)
    x = random_x(p, generator, dtype)
    if "quantum" in p:  # x on a grid of 1/64: its squares are exact in float32 (see the d1 case)
        x = torch.round(x / p["quantum"]) * p["quantum"]
    inputs["x"] = x.to(dtype)
    if op == "no_affine":
        del inputs["gamma"], inputs["beta"]
    if op in ("backward", "backward_op"):
        inputs["dy"] = random_dy(p["shape"], generator, dtype)
    if op == "backward_op":
        inputs["mean"], inputs["rstd"] = saved_statistics(inputs["x"])
    return inputs


def on_device(case, inputs):
    """The overflow case's 4 GiB tensor, strided layouts and spoiled arguments are made here,
    on the device, where the op will see them."""
    p = case.params
    if p["op"].startswith("overflow"):
        inputs["x"] = tiled_rows(inputs["tile"], inputs["rows"])
    for name in p.get("strided", ()):
        inputs[name] = LAYOUTS[p["layout"]](inputs[name])
    return spoil(case, inputs)


# ---- the calls: `ext` is the unit's entry module, layernorm.py; ext._ext is the compiled extension ----

def _as_list(normalized_shape):
    return [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)


def _forward(ext, inputs):
    return ext._ext.forward(inputs["x"], _as_list(inputs["normalized_shape"]), inputs["gamma"], inputs["beta"],
                            inputs["eps"])


def _backward(ext, inputs):
    def layer_norm(x, gamma, beta):
        return ext.layer_norm(x, inputs["normalized_shape"], gamma, beta, inputs["eps"])
    return gradients(layer_norm, inputs, ("x", "gamma", "beta"), "dy")


GRADCHECK_INPUTS = ("x", "gamma", "beta")  # what gradcheck nudges and differentiates for


def _gradcheck(ext, inputs):
    def layer_norm(x, gamma, beta):
        return ext.layer_norm(x, inputs["normalized_shape"], gamma, beta, inputs["eps"])
    return jacobian_probe(layer_norm, inputs, GRADCHECK_INPUTS)


def _no_affine(ext, inputs):
    return (ext.layer_norm(inputs["x"], inputs["normalized_shape"], eps=inputs["eps"]),)


def _overflow_forward(ext, inputs):
    return last_of(_forward(ext, inputs))


def _overflow_backward(ext, inputs):
    x = inputs["x"]
    dx, dgamma, dbeta = ext._ext.backward(x, x, inputs["gamma"], inputs["mean"], inputs["rstd"])  # dy = x:
    return dx[-LAST_ROWS:].clone(), dgamma, dbeta  # no second 4 GiB tensor


# ---- what is right: float64 on the inputs as given (fp16 and bf16 ones already rounded) ----

def _last_rows(inputs):
    """The overflow case's last rows in float64, rebuilt from the tile."""
    return last_rows(inputs["tile"], inputs["rows"])


def _overflow_param_sums(inputs):
    """dgamma = Σ_r x_r · x̂_r and dbeta = Σ_r x_r over all rows (dy = x), and the sums of their
    terms' sizes, from the tile: row r differs from tile row t = r % TILE_ROWS by a constant, so
    x̂_r = x̂_t (up to the float32 rounding of the mean given, 1e-7 of x̂), and the rows of t add
    up to n_t · tile_t + (the sum of their offsets)."""
    tile = inputs["tile"].double()
    owner = torch.arange(inputs["rows"]) % TILE_ROWS
    count = torch.bincount(owner, minlength=TILE_ROWS).double()[:, None]
    offsets = torch.bincount(owner, weights=row_offsets(inputs["rows"]), minlength=TILE_ROWS)[:, None]
    mean, rstd = statistics(tile)
    xhat = (tile - mean[:, None]) * rstd[:, None]
    row_sums = count * tile + offsets
    size_sums = count * tile.abs() + offsets  # offsets >= 0: bounds Σ_r |x_r|
    return (xhat * row_sums).sum(0), row_sums.sum(0), (xhat.abs() * size_sums).sum(0), size_sums.sum(0)


def _forward_reference(inputs):
    return layer_norm64(inputs["x"].double(), inputs["gamma"].double(), inputs["beta"].double(), inputs["eps"])


def _no_affine_reference(inputs):
    return (layer_norm64(inputs["x"].double(), 1.0, 0.0, inputs["eps"])[0],)


def _gradients_reference(inputs):
    return autograd_gradients64(inputs["x"], inputs["gamma"], inputs["beta"], inputs["dy"], inputs["eps"])


def _overflow_forward_reference(inputs):
    return layer_norm64(_last_rows(inputs), inputs["gamma"].double(), inputs["beta"].double(), inputs["eps"])


def _overflow_backward_reference(inputs):
    x = _last_rows(inputs)
    mean, rstd = (inputs[name][-LAST_ROWS:].double() for name in ("mean", "rstd"))
    dgamma, dbeta, _, _ = _overflow_param_sums(inputs)
    return dx_formula(x, x, inputs["gamma"].double(), mean, rstd), dgamma, dbeta


# The tolerances: common/layernorm_tests.py's model, which also allows what the float64
# reference's own x̂ is off by (D = 1 makes that show).

def _dtype(inputs):
    return inputs["tile"].dtype if "tile" in inputs else inputs["x"].dtype


def _rows(inputs):
    """x as rows [rows, D] in float64 (the overflow case's last rows)."""
    x = _last_rows(inputs) if inputs["op"].startswith("overflow") else inputs["x"].double()
    return x.reshape(-1, x.shape[-1])


def _forward_tolerance(inputs):
    x = _rows(inputs)
    ones = torch.ones(x.shape[-1], dtype=torch.float64)
    gamma = inputs["gamma"].double() if "gamma" in inputs else ones  # no_affine: a scale of 1, a shift of 0
    beta = inputs["beta"].double() if "beta" in inputs else 0 * ones
    return forward_tolerance(x, gamma, beta, _dtype(inputs), condition_by_std, reference_error=True)


def _backward_tolerance(inputs):
    x = _rows(inputs)
    dy = inputs["dy"].double().reshape(x.shape)
    return backward_tolerance(x, inputs["gamma"].double(), dy, _dtype(inputs), condition_by_std, reference_error=True)


def _overflow_backward_tolerance(inputs):
    """dy = x; dgamma and dbeta sum all the rows, not only the last ones that come back."""
    x = _rows(inputs)
    _, _, dgamma_terms, dbeta_terms = _overflow_param_sums(inputs)
    return backward_tolerance(x, inputs["gamma"].double(), x, _dtype(inputs), condition_by_std,
                              reference_error=True, param_sizes=(max_abs(dgamma_terms), max_abs(dbeta_terms)))


# ---- what a wrong output says: the usual slips as models of the outputs, and rows cut off ----
# (most causes show in where the wrong and the NaN elements lie: course/hints.py reads that)

def _gradient_slips(name, inputs):
    """The gradients of a LayerNorm that adds a constant eps of its own, not the eps passed."""
    if inputs["eps"] == EPS:
        return {}
    gradients64 = autograd_gradients64(inputs["x"], inputs["gamma"], inputs["beta"], inputs["dy"], EPS)
    return {f"{name} matches the gradients of a LayerNorm with eps = {EPS:g}, not the eps passed "
            f"({inputs['eps']:g}): check where eps comes from": gradients64[GRADIENTS.index(name)]}


def _rows_cut(reference, tolerance):
    """An Op.diagnose for the overflow cases, whose outputs are x's last rows: where the wrong
    rows start at the row whose offset passes 2^31 - 1, an offset in 32 bits wraps there."""
    def diagnose(name, got, inputs):
        if name not in ("y", "dx"):
            return []
        expected = reference(inputs)[0]  # y or dx
        atol, rtol = tolerance(inputs)[name]
        wrong = ~((got.double() - expected).abs() <= atol + rtol * expected.abs()).all(dim=-1)
        if not wrong.any():
            return []
        first = int(wrong.double().argmax())
        row = inputs["rows"] - got.shape[0] + first  # the rows that come back are the last ones
        line = offset_wraps(row, inputs["tile"].shape[-1]) if wrong[first:].all() else None
        return [f"{name} is wrong from row {row} on: {line}"] if line else []
    return diagnose


OPS = {
    "forward": Op(nan_filled(_forward), _forward_reference, FORWARD_OUTPUTS, forward_dtypes(), _forward_tolerance,
                  diagnose=model_reading(forward_slips, _forward_reference, FORWARD_OUTPUTS, _forward_tolerance)),
    "backward": Op(nan_filled(_backward), _gradients_reference, GRADIENTS, dtypes_like("x", 3), _backward_tolerance,
                   diagnose=model_reading(_gradient_slips, _gradients_reference, GRADIENTS, _backward_tolerance)),
    "no_affine": Op(nan_filled(_no_affine), _no_affine_reference, ("y",), dtypes_like("x"), _forward_tolerance),
    "gradcheck": gradcheck_op(nan_filled(_gradcheck), GRADCHECK_INPUTS),
    "backward_op": Op(nan_filled(compiled_backward), _gradients_reference, GRADIENTS, dtypes_like("x", 3),
                      _backward_tolerance),
    "overflow_forward": Op(nan_filled(_overflow_forward), _overflow_forward_reference, FORWARD_OUTPUTS,
                           forward_dtypes("tile"), _forward_tolerance,
                           diagnose=_rows_cut(_overflow_forward_reference, _forward_tolerance)),
    "overflow_backward": Op(nan_filled(_overflow_backward), _overflow_backward_reference, GRADIENTS,
                            dtypes_like("tile", 3), _overflow_backward_tolerance,
                            diagnose=_rows_cut(_overflow_backward_reference, _overflow_backward_tolerance)),
}


# What each op runs of the code students write ("file, function", as its TODO line names it), by
# path: a public test runs as soon as its own are written (course/todos.py), so the forward before
# the backward's checks, the CPU before forward_cuda, an error case once the checks it meets are.
# layernorm.cpp's ops refuse while theirs are unwritten: the checks first, then the rest; the
# backward's kernels and launch are given.
LAYOUT = ("layernorm.cpp, row_major, num_rows and batch_shape",)
FORWARD_CHECKS = ("layernorm.cpp, check_x", "layernorm.cpp, check_forward_inputs")
BACKWARD_CHECKS = ("layernorm.cpp, check_x", "layernorm.cpp, check_backward_inputs") + LAYOUT  # batch_shape
FORWARD = {"cpu": FORWARD_CHECKS + LAYOUT, "cuda": FORWARD_CHECKS + LAYOUT + ("layernorm.cpp, forward_cuda",)}
BACKWARD_OP = {"cpu": BACKWARD_CHECKS, "cuda": BACKWARD_CHECKS}
LAYER_NORM = ("layernorm.py, layer_norm",)
FUNCTIONS_RUN = {
    "forward": FORWARD,
    "forward errors": {"cpu": FORWARD_CHECKS, "cuda": FORWARD_CHECKS},
    "no_affine": {path: LAYER_NORM + functions for path, functions in FORWARD.items()},
    "backward": {path: LAYER_NORM + functions + ("layernorm.cpp, check_backward_inputs",)
                 for path, functions in FORWARD.items()},
    "backward_op": BACKWARD_OP,
    "gradcheck": {path: LAYER_NORM + functions + ("layernorm.cpp, check_backward_inputs",)
                  for path, functions in FORWARD.items()},
    "overflow_forward": FORWARD,
    "overflow_backward": BACKWARD_OP,
}


# ---- the cases ----

# The lab's hints name the tool to reach for and what to read in its output, never the line or
# the fix: finding those is the lab (lesson, section 7).
TAIL_HINT = ("D is not a multiple of 32 here: read the mismatch report's columns (which are wrong, which are NaN: "
             "never written), then run memcheck on this case (lesson 7.1, 7.3)")
HINTS = {
    "single_row": "B = 1: the mismatch report says which outputs are wrong; does your grid assume more rows?",
    "many_rows": "more rows than one launch has blocks (65535): read which rows the mismatch report names (lesson 7.1)",
    "nd": "x has more than two dimensions: compare each output's shape in the report with the expected one",
    "transposed": "x (and dy) are transposed views: what order are their elements in memory, and what does "
                  "data_ptr() assume?",
    "sliced": "x, gamma and beta (and dy) are strided slices with NaN in the gaps: a NaN in your output was read "
              "from a gap",
    "empty": "no rows: read the CUDA error the op raised, with CUDA_LAUNCH_BLOCKING=1 (lesson 7.2)",
    "large_mean": "|mean| >> std: the report's errors grow with |mean| / std; which formula for the variance "
                  "cancels? (lesson 3.1)",
    "fp16": "fp16: the report shows mean and rstd off by about 1e-3: in which precision do your sums run? (lesson 3.2)",
    "bf16": "bf16: the report shows mean and rstd off by about 1e-2: in which precision do your sums run? (lesson 3.2)",
    "fp64": "float64: the report's errors are float32-sized: does a step of the float64 path (a sum, a math "
            "function) run in float? gradcheck in float64 shows it too (lesson 7.6)",
    "overflow": "only the 4 GiB case fails: find the first wrong row in the mismatch report and the offset, in "
                "elements, of its first value; run the case under CUDA_LAUNCH_BLOCKING=1 (lesson 7.2)",
}
STREAM_HINT = ("the inputs arrive on a side stream the caller made current, after a delay: which stream does "
               "each of your launches run on? (lesson 7.8)")
GRADCHECK_HINT = ("torch.autograd.gradcheck of layer_norm in float64 failed: read where the two Jacobians differ "
                  "and by how much: a term's size in some elements points at the backward's formula, noise of "
                  "about 1e-2 all over a row's block at a step of the float64 path taken in float (lesson 7.6)")


def _edge(what, shape, dtype=torch.float32, hint="", strided=(), layout="", **params):
    """One edge case as four tests: forward and backward, on the CPU and on the GPU."""
    cases = []
    for device in ("cpu", "cuda"):
        for op, short in (("forward", "fwd"), ("backward", "bwd")):
            names = tuple(n for n in strided if op == "backward" or n != "dy")
            cases.append(values_case(f"{device}_{short}_{what}", device, shape, dtype, hint=hint or HINTS.get(what, ""),
                                     group=op, op=op, strided=names, layout=layout, **params))
    return cases


# Each op's arguments, x first: an error message names its own and no other but x.
ARGUMENTS = {"forward": ("x", "normalized_shape", "gamma", "beta", "eps"),
             "backward_op": ("x", "dy", "gamma", "mean", "rstd")}


def _error(name, words, device="cpu", op="forward", **bad):
    return error_case(name, words, CHECK_HINT, ARGUMENTS[op], device, op=op, bad=bad)


CASES = [
    *_edge("d4097", (9, 4097), hint=TAIL_HINT),
    *_edge("nd", (2, 3, 5, 64)),
    *_edge("transposed", (64, 96), strided=("x", "dy"), layout="transposed"),
    *_edge("empty", (0, 64)),
    *_edge("fp16", (64, 4096), torch.float16),
    Case("cuda_bwd_current_stream", "cuda_backward", "cuda", 1.0, dict(op="backward", shape=(512, 1024)),
         checks=(SIDE_STREAM,), hint=STREAM_HINT),
    Case("cuda_fwd_overflow", "cuda_overflow", "cuda", 2.0, dict(op="overflow_forward", dtype=torch.float16),
         hint=HINTS["overflow"], timeout=120.0, gpu_bytes=OVERFLOW_GPU_BYTES),
    _error("error_gamma_shape", ("gamma",), gamma=lambda t: t[:-1]),
    _error("error_eps_zero", ("eps",), eps=lambda e: 0.0),
]

# The debugging lab's own checks, by tool: what course/lab.py runs for a planted bug found by a
# tool that is no sanitizer. Not graded here (the hidden suite grades the same check).
GRADCHECK_SHAPE = (2, 32)


def gradcheck_case(name):
    return values_case(name, "cuda", GRADCHECK_SHAPE, torch.float64, checks=(), hint=GRADCHECK_HINT,
                       group="gradients", op="gradcheck")


LAB_CASES = {"gradcheck": [gradcheck_case("lab_gradcheck_fp64")]}
