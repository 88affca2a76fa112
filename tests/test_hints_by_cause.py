"""Each planted cause of days 04, 05, 08 and 09 (and day06's GPU-only strip), imitated on cases
it loses: the grader's reading of the imitation names the cause the mutant declares (its
`diagnosis` in solutions/<unit>/mutants.toml), and neither a right output nor an unrelated error
gets that line. No build: the imitations compute in float64 on the CPU what each mutant's
kernels return. tests/test_autograder.py checks the same lines against the built mutants (the
GPU-only ones on a GPU)."""

import dataclasses
import functools
import math

import pytest
import torch

from course import judge
from course.cases import make_input_sets
from course.hints import as_row_major
from course.ops import op_for
from course.spec import mutants, units

SEED = 3
DAYS = {
    "day04": "day04_layernorm_edge_cases",
    "day05": "day05_layernorm_performance",
    "day06": "day06_bias_gelu",
    "day08": "day08_triton_basics",
    "day09": "day09_rmsnorm_int8",
}


@functools.cache
def _suite(day):
    unit = units.load(DAYS[day])
    return unit, unit.tests(hidden=True)


def _case(day, name):
    unit, spec = _suite(day)
    case = next(c for c in spec.CASES if c.name == name)
    return unit, spec, case, make_input_sets(spec, case, SEED)[0]


def _mutant(unit, name):
    """A mutant, or a bug the debugging lab's starter ships (planted_bugs.toml), by name."""
    return {**mutants.load(unit), **mutants.load_planted(unit)}[name]


def _reading(spec, case, inputs, outputs) -> str:
    """What the grader says of `outputs` for the case's `inputs`: the mismatch and its reading."""
    op = op_for(spec, inputs)
    outputs = tuple(t.to(dtype) for t, dtype in zip(outputs, op.dtypes(inputs)))
    return "\n".join(judge._values_problems(spec, inputs, outputs, judge._laid_out(spec, case, inputs)))


# ---- LayerNorm's pieces, in float64 on rows [rows, D] ----


def _rows(t):
    return t.double().reshape(-1, t.shape[-1])


def _normalized(x, gamma, beta, mean, rstd):
    return (x - mean[:, None]) * rstd[:, None] * gamma + beta


def _statistics(x, eps, cols=None):
    """mean and rstd over the first `cols` columns of each row, divided by D (a loop stopped short)."""
    used = x[:, :cols] if cols is not None else x
    mean = used.sum(dim=1) / x.shape[1]
    return mean, 1 / torch.sqrt(((used - mean[:, None]) ** 2).sum(dim=1) / x.shape[1] + eps)


def _dx(dy, x, gamma, mean, rstd):
    xhat = (x - mean[:, None]) * rstd[:, None]
    g = dy * gamma
    return rstd[:, None] * (g - g.mean(dim=1, keepdim=True) - xhat * (g * xhat).mean(dim=1, keepdim=True))


def _layer_norm_outputs(inputs, mean, rstd, written):
    """The forward's (y, mean, rstd), or the backward's (dx, dgamma, dbeta), on the statistics
    given, with NaN where `written` [rows, D] is False: what a kernel returns that used them."""
    x, shape = _rows(inputs["x"]), inputs["x"].shape
    gamma, beta = inputs["gamma"].double(), inputs["beta"].double()
    if "dy" not in inputs:
        y = _normalized(x, gamma, beta, mean, rstd).where(written, float("nan"))
        return y.reshape(shape), mean.reshape(shape[:-1]), rstd.reshape(shape[:-1])
    dy = _rows(inputs["dy"])
    dx = _dx(dy, x, gamma, mean, rstd).where(written, float("nan"))
    xhat = (x - mean[:, None]) * rstd[:, None]
    return dx.reshape(shape), (dy * xhat).sum(dim=0), dy.sum(dim=0)


def _everywhere(x):
    return torch.ones_like(x, dtype=torch.bool)


def _tail_ignored(inputs):
    """Every row loop stops at the last multiple of 32: the tail is left out of the sums and never written."""
    x = _rows(inputs["x"])
    cols = x.shape[1] // 32 * 32
    written = _everywhere(x)
    written[:, cols:] = False
    return _layer_norm_outputs(inputs, *_statistics(x, inputs["eps"], cols), written)


def _rstd_in_float(inputs):
    """float64 x, a float32 rstd."""
    x = _rows(inputs["x"])
    mean, rstd = _statistics(x, inputs["eps"])
    return _layer_norm_outputs(inputs, mean, rstd.float().double(), _everywhere(x))


def _last_column_never_written(inputs):
    x = _rows(inputs["x"])
    written = _everywhere(x)
    written[:, -1] = False
    return _layer_norm_outputs(inputs, *_statistics(x, inputs["eps"]), written)


def _rows_from_first_dim(inputs):
    """Only x.size(0) rows are normalized; every other row and statistic is never written."""
    x = _rows(inputs["x"])
    mean, rstd = _statistics(x, inputs["eps"])
    counted = inputs["x"].shape[0]
    mean[counted:], rstd[counted:] = float("nan"), float("nan")
    written = _everywhere(x)
    written[counted:] = False
    return _layer_norm_outputs(inputs, mean, rstd, written)


def _unstable_variance(inputs):
    """E[x^2] - E[x]^2 in float32: at |mean| / std of 1e6, noise, negative in some rows (NaN)."""
    x32 = _rows(inputs["x"]).float()
    mean = x32.mean(dim=1)
    rstd = torch.rsqrt((x32 * x32).mean(dim=1) - mean * mean + inputs["eps"])
    return _layer_norm_outputs(inputs, mean.double(), rstd.double(), _everywhere(x32))


def _half_sums(inputs):
    """Each thread's running sums rounded to the element type, then added up in float32."""
    dtype, x = inputs["x"].dtype, _rows(inputs["x"])
    threads = min(256, x.shape[1])

    def sums(terms):
        partial = torch.zeros(x.shape[0], threads, dtype=dtype)
        for start in range(0, x.shape[1], threads):
            chunk = terms[:, start : start + threads]
            partial[:, : chunk.shape[1]] = (partial[:, : chunk.shape[1]].float() + chunk.float()).to(dtype)
        return partial.double().sum(dim=1)

    mean = sums(x) / x.shape[1]
    rstd = 1 / torch.sqrt(sums((x - mean[:, None]) ** 2) / x.shape[1] + inputs["eps"])
    return _layer_norm_outputs(inputs, mean, rstd, _everywhere(x))


def _with_eps(eps):
    def imitation(inputs):
        x = _rows(inputs["x"])
        return _layer_norm_outputs(inputs, *_statistics(x, eps), _everywhere(x))

    return imitation


def _strides_ignored(inputs):
    """The right op on every strided input read as contiguous rows from its data pointer."""
    _, spec = _suite("day04")
    as_read = {k: as_row_major(v) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    return op_for(spec, inputs).reference(as_read)


# ---- day05: version 2 and 3's kernels ----


def _warp_strides_by_block(inputs):
    """Lanes 0 to 31 stride by 256: columns 32 to 255 of every 256 never read nor written."""
    x = _rows(inputs["x"])
    covered = (torch.arange(x.shape[1]) % 256 < 32).expand_as(x)
    mean = x.where(covered, 0.0).sum(dim=1) / x.shape[1]
    centred = (x - mean[:, None]).where(covered, 0.0)
    rstd = 1 / torch.sqrt((centred**2).sum(dim=1) / x.shape[1] + inputs["eps"])
    return _layer_norm_outputs(inputs, mean, rstd, covered)


def _last_vector_skipped(inputs):
    """Version 3 stops one vector (16 bytes) early in every row."""
    x = _rows(inputs["x"])
    cols = x.shape[1] - 16 // inputs["x"].element_size()
    written = _everywhere(x)
    written[:, cols:] = False
    return _layer_norm_outputs(inputs, *_statistics(x, inputs["eps"], cols), written)


def _bytes_short(count):
    def imitation(inputs):
        _, spec = _suite("day05")
        return (op_for(spec, inputs).reference(inputs)[0] - count(inputs),)

    return imitation


def _element_bytes(inputs):
    return torch.finfo(inputs["dtype"]).bits // 8


_without_statistics = _bytes_short(lambda i: 4 * 2 * i["rows"] * (2 if i["dtype"] == torch.float64 else 1))
_without_dx = _bytes_short(lambda i: _element_bytes(i) * i["rows"] * i["cols"])


# ---- day06 ----


def _dbias_first_strip_only(inputs):
    """dx right; dbias the sum of the first strip's rows (32) alone."""
    _, spec = _suite("day06")
    dx, _ = op_for(spec, inputs).reference(inputs)
    u = _rows(inputs["x"]) + inputs["bias"].double()
    u.requires_grad_()
    (slope,) = torch.autograd.grad(torch.nn.functional.gelu(u, approximate=inputs["approximate"]).sum(), u)
    return dx, (_rows(inputs["dy"]) * slope)[:32].sum(dim=0)


# ---- day08 ----


def _softmax_rows(x, row_max=True):
    x = x.float()
    shifted = x - x.amax(dim=1, keepdim=True) if row_max else x
    numerator = shifted.exp()
    return (numerator / numerator.sum(dim=1, keepdim=True)).double()


def _softmax_out(inputs, y):
    y = y.reshape(inputs["x"].shape)
    return (torch.nan_to_num(y, nan=-1.0) if inputs["nan_rows"] else y,)


def _softmax_tail_not_masked(inputs):
    """Each row's block of the next power of two reads on into the next row (zeros past the tensor)."""
    x = _rows(inputs["x"])
    rows, cols = x.shape
    spill = 2 ** math.ceil(math.log2(cols)) - cols
    after = torch.cat([x.reshape(-1), torch.zeros(spill)])
    block = torch.stack([after[r * cols : r * cols + cols + spill] for r in range(rows)])
    return _softmax_out(inputs, _softmax_rows(block)[:, :cols])


def _softmax_unstable(inputs):
    return _softmax_out(inputs, _softmax_rows(_rows(inputs["x"]), row_max=False))


def _add_reads_past_the_block(inputs):
    """Program p adds elements p to p + 1023: the first programs - 1 + 1024 elements are written."""
    out = (inputs["x"].double() + inputs["y"].double()).reshape(-1)
    written = -(-out.numel() // 1024) - 1 + 1024
    out[written:] = float("nan")
    return (out.reshape(inputs["x"].shape),)


# ---- day09: the quantization's rows ----


def _quant_rows(inputs):
    if inputs["op"] == "residual":
        return _rows((inputs["x"].double() + inputs["residual"].double()).to(inputs["x"].dtype))
    return _rows(inputs["x"])


def _quantized(inputs, sums, peak_of=None):
    """(q, scale[, residual]) with each row's sum of squares `sums`; the scale's max taken of
    peak_of(x, rstd, w), |y| where None."""
    x, w = _quant_rows(inputs), inputs["weight"].double()
    rstd = 1 / torch.sqrt(sums / x.shape[1] + inputs["eps"])
    y = x * rstd[:, None] * w
    peak = (y if peak_of is None else peak_of(x, rstd[:, None], w)).abs().amax(dim=1)
    scale = peak / 127
    q = torch.where(scale[:, None] == 0, 0.0, (y / scale.where(scale > 0, 1.0)[:, None]).round()).clamp(-127, 127)
    shape = inputs["x"].shape
    outputs = (q.reshape(shape), scale.reshape(shape[:-1]))
    return (*outputs, x.reshape(shape)) if inputs["op"] == "residual" else outputs


def _scale_before_weight(inputs):
    x = _quant_rows(inputs)
    return _quantized(inputs, (x * x).sum(dim=1), peak_of=lambda x, rstd, w: x * rstd)


def _triton_tail_not_masked(inputs):
    """The block of the next power of two reads on into the next row: its squares are added in."""
    x = _quant_rows(inputs) if inputs["op"] != "residual" else _rows(inputs["x"])
    rows, cols = x.shape
    spill = 2 ** math.ceil(math.log2(cols)) - cols
    after = torch.cat([x.reshape(-1), torch.zeros(spill, dtype=x.dtype)])
    leaked = torch.stack([after[(r + 1) * cols : (r + 1) * cols + spill] for r in range(rows)])
    own = _quant_rows(inputs)
    return _quantized(inputs, (own * own).sum(dim=1) + (leaked * leaked).sum(dim=1))


def _accumulates_in_fp16(inputs):
    """The squares added up in float16, by halves (a tree, as tl.sum)."""
    x = _quant_rows(inputs)
    sums = (x * x).to(torch.float16)
    while sums.shape[1] > 1:
        if sums.shape[1] % 2:
            sums = torch.cat([sums, torch.zeros(sums.shape[0], 1, dtype=sums.dtype)], dim=1)
        sums = (sums[:, 0::2].float() + sums[:, 1::2].float()).to(torch.float16)
    return _quantized(inputs, sums.double()[:, 0])


def _round_half_away_from_zero(inputs):
    q, scale = _quantized(inputs, (_quant_rows(inputs) ** 2).sum(dim=1))
    x, w = _quant_rows(inputs), inputs["weight"].double()
    y = x / torch.sqrt((x * x).mean(dim=1, keepdim=True) + inputs["eps"]) * w
    exact = y / scale.reshape(-1, 1)
    away = torch.sign(exact) * torch.floor(exact.abs() + 0.5)
    return away.clamp(-127, 127).reshape(q.shape), scale


# (day, mutant, small cases it loses, its imitation). Rows past a launch's reach (many_rows)
# are course.hints.late_rows's, tests/test_hints.py's; their cases are too large to read here.
IMITATED = [
    ("day04", "tail_ignored", ("cuda_fwd_d33", "cuda_fwd_d7", "cuda_bwd_d1000"), _tail_ignored),
    ("day04", "unstable_variance", ("cpu_fwd_large_mean", "cuda_bwd_large_mean"), _unstable_variance),
    ("day04", "half_sums", ("cuda_fwd_bf16", "cpu_fwd_fp16"), _half_sums),
    ("day04", "ignores_strides", ("cpu_fwd_transposed", "cpu_fwd_sliced", "cuda_bwd_sliced"), _strides_ignored),
    ("day04", "rows_from_first_dim", ("cpu_fwd_nd", "cuda_bwd_nd", "cpu_fwd_sliced"), _rows_from_first_dim),
    ("day04", "ignores_eps", ("cpu_fwd_large_eps", "cuda_bwd_large_eps"), _with_eps(1e-5)),
    (
        "day04",
        "last_column_never_written",
        ("cuda_bwd_d1000", "cuda_bwd_d1", "cuda_bwd_transposed"),
        _last_column_never_written,
    ),
    ("day04", "rstd_in_float", ("cuda_fwd_fp64", "cuda_bwd_fp64"), _rstd_in_float),  # a planted bug
    (
        "day05",
        "forward_bytes_without_statistics",
        ("cpu_forward_bytes_float16", "cpu_forward_bytes_float64"),
        _without_statistics,
    ),
    (
        "day05",
        "backward_bytes_dy_and_x_only",
        ("cpu_backward_bytes_float32", "cpu_backward_bytes_bfloat16"),
        _without_dx,
    ),
    (
        "day05",
        "warp_strides_by_block",
        (
            "cuda_warp_per_row_fp64_d320",
            "cuda_warp_per_row_fp32_d33",
            "cuda_warp_per_row_nd",
            "cuda_vectorized_fp32_d4097",
        ),
        _warp_strides_by_block,
    ),
    (
        "day05",
        "vectorized_last_vector_skipped",
        (
            "cuda_vectorized_fp32_d1000",
            "cuda_vectorized_fp16_d8",
            "cuda_vectorized_fp64_d320",
            "cuda_vectorized_bf16_d1024",
        ),
        _last_vector_skipped,
    ),
    ("day06", "dbias_first_strip_only", ("cuda_backward_erf_fp32", "cuda_autograd_tanh_fp32"), _dbias_first_strip_only),
    (
        "day08",
        "softmax_tail_not_masked",
        ("cuda_softmax_fp32_tail", "cuda_softmax_fp16_tail", "cuda_softmax_fp32_neg_inf", "cuda_softmax_fp32_4d"),
        _softmax_tail_not_masked,
    ),
    ("day08", "softmax_unstable", ("cuda_softmax_fp32_huge", "cuda_softmax_fp16_huge"), _softmax_unstable),
    (
        "day08",
        "add_reads_past_the_block",
        ("cuda_add_fp32_transposed", "cuda_add_bf16_nd", "cuda_add_fp32_poisoned"),
        _add_reads_past_the_block,
    ),
    (
        "day09",
        "scale_before_weight",
        ("cuda_quant_fp32_d1", "cuda_quant_fp32_transposed", "cuda_residual_fp16_zero_rows"),
        _scale_before_weight,
    ),
    (
        "day09",
        "round_half_away_from_zero",
        ("cuda_quant_fp32_ties", "cuda_quant_bf16_ties"),
        _round_half_away_from_zero,
    ),
    (
        "day09",
        "triton_tail_not_masked",
        ("triton_quant_fp32_tail", "triton_residual_fp16", "triton_quant_bf16_3d"),
        _triton_tail_not_masked,
    ),
    (
        "day09",
        "triton_accumulates_in_fp16",
        (
            "triton_quant_fp32_d1",
            "triton_residual_fp16",
            "triton_quant_fp32_huge",
            "triton_quant_fp32_ties",
            "triton_quant_fp16_zero_rows",
        ),
        _accumulates_in_fp16,
    ),
]
PARAMS = [
    pytest.param(day, name, case, imitation, id=f"{day}:{name}:{case}")
    for day, name, cases, imitation in IMITATED
    for case in cases
]
FIRST = [pytest.param(day, name, cases[0], id=f"{day}:{name}:{cases[0]}") for day, name, cases, _ in IMITATED]


@pytest.mark.parametrize("day, name, case_name, imitation", PARAMS)
def test_an_imitated_cause_is_named_as_its_mutant_declares(day, name, case_name, imitation):
    unit, spec, case, inputs = _case(day, case_name)
    mutant = _mutant(unit, name)
    assert case_name in mutant.expected_losses([c.name for c in spec.CASES]), "the mutant does not lose this case"
    line = mutant.diagnosis_for(case_name)
    assert line, f"{name} declares no diagnosis for {case_name}"
    laid_out = spec.on_device(case, dict(inputs))  # the inputs as the op sees them
    said = _reading(spec, case, inputs, imitation(laid_out))
    assert line in said, said


@pytest.mark.parametrize("day, name, case_name", FIRST)
def test_a_right_output_or_an_unrelated_error_is_not_named_so(day, name, case_name):
    """The right outputs pass; outputs off by a factor (q halved) do not get the mutant's line."""
    unit, spec, case, inputs = _case(day, case_name)
    line = _mutant(unit, name).diagnosis_for(case_name)
    op = op_for(spec, inputs)
    right = op.reference(inputs)
    assert _reading(spec, case, inputs, right) == ""
    unrelated = tuple(
        t * 1.5 if dtype.is_floating_point else torch.div(t, 2, rounding_mode="trunc")
        for t, dtype in zip(right, op.dtypes(inputs))
    )
    said = _reading(spec, case, inputs, unrelated)
    assert said and line not in said, said


def test_declared_lines_are_told_apart_on_a_shared_case():
    """Where two mutants lose the same case with lines of their own, each imitation gets its own
    line only."""
    by_case = {}
    for day, name, cases, imitation in IMITATED:
        for case_name in cases:
            by_case.setdefault((day, case_name), []).append((name, imitation))
    shared = {key: found for key, found in by_case.items() if len(found) > 1}
    assert shared
    for (day, case_name), found in shared.items():
        unit, spec, case, inputs = _case(day, case_name)
        lines = {name: _mutant(unit, name).diagnosis_for(case_name) for name, _ in found}
        for name, imitation in found:
            said = _reading(spec, case, inputs, imitation(spec.on_device(case, dict(inputs))))
            others = [line for other, line in lines.items() if other != name and line != lines[name]]
            assert lines[name] in said and not any(line in said for line in others), (name, said)


def test_rows_past_a_32_bit_offset_are_named_in_the_overflow_case():
    """offset_32bit declares nothing: whether the wrapped offset faults or reads another row
    depends on what lies 4 GiB before x. Where it comes back wrong, rows from 32768 on are."""
    unit, spec, case, inputs = _case("day04", "cuda_fwd_overflow")
    assert "cuda_fwd_overflow" in mutants.load(unit)["offset_32bit"].expected_losses([case.name])
    y, mean, rstd = op_for(spec, inputs).reference(inputs)
    y = y.clone()
    y[-1] = float("nan")  # the last row is row 32768: 32768 * 65536 = 2^31
    said = _reading(spec, case, inputs, (y, mean, rstd))
    assert "y is wrong from row 32768 on: row 32768 is the first whose offset" in said, said
    assert "wraps" not in _reading(spec, case, inputs, (y * 1.5, mean, rstd))


def test_a_perf_case_answered_with_the_input_set_befores_output_names_it():
    """answers_each_shape_once: the timed calls on the second input set return the first's y."""
    unit, spec = _suite("day05")
    perf = next(c for c in spec.CASES if c.name == "cuda_perf_fp32_d1024")
    case = dataclasses.replace(perf, params={**perf.params, "shape": (64, 256)})
    sets = [spec.make_inputs(case, torch.Generator().manual_seed(seed)) for seed in (1, 2)]
    first = op_for(spec, sets[0]).reference(sets[0])
    dtypes = op_for(spec, sets[0]).dtypes(sets[0])
    answers = [tuple(t.to(d) for t, d in zip(first, dtypes))] * 2
    said = judge._timed_outputs_problem(spec, case, sets, {"outputs": answers})
    line = mutants.load(unit)["answers_each_shape_once"].diagnosis_for(perf.name)
    assert "input set 2 of 2" in said and line in said, said
    right = [tuple(t.to(d) for t, d in zip(op_for(spec, i).reference(i), dtypes)) for i in sets]
    assert judge._timed_outputs_problem(spec, case, sets, {"outputs": right}) == ""
