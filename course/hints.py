"""What the shape of a wrong output says about its cause.

A case's fixed hint guesses the mistake from the case's purpose, and can point the wrong way:
a variance divided by D - 1 fails a "tail" case too. These read the mismatch itself: which
elements are wrong, by how much, and how that lines up with the inputs. Each returns a line
or None; `explain` returns the lines of those that match. A line names the symptom and where
to look, never the line that fixes it. Readings of a whole call (every output against a
model of the mistake: `strides_ignored`, `swapped`, `repeated`) are tried first by the judge;
a unit reads its own mistakes with `follows`, `followed_model` and `first_followed`, from an
op's `diagnose` (course/ops.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

GRID_Y_LIMIT = 65535  # gridDim.y and gridDim.z can be no larger
INT32_LIMIT = 2**31  # the first offset a 32-bit int cannot hold
SAME_FACTOR_SPREAD = 1e-3  # relative spread of got / expected that counts as one factor
MOSTLY = 0.5  # the share of a region that must be wrong for "this region is wrong"
CONDITION_GAP = 10.0  # how much worse conditioned the wrong rows are than the right ones
LOW_PRECISION = {torch.float16, torch.bfloat16}
_EXPONENT_BITS = {torch.float16: 5, torch.bfloat16: 8}
INT8_LIMIT = 127  # the largest |q| of a symmetric INT8 quantization
STRIP_ROWS_READ = 1 << 14  # sums over more rows are not read for a strip left out
PERIODS = (32, 64, 128, 256, 512, 1024)  # a warp, and the block widths kernels stride by


def _rows_and_columns(got: torch.Tensor, inputs: dict) -> tuple[int, int]:
    """The output as [rows, columns]: the last dim is columns; a 1-D output with one value per
    row of x (a mean, an rstd) is a column of rows; another 1-D output (a dbias) is one row."""
    if got.dim() >= 2:
        return got.numel() // got.shape[-1], got.shape[-1]
    x = inputs.get("x")
    if isinstance(x, torch.Tensor) and x.dim() >= 2 and x.numel() // x.shape[-1] == got.numel():
        return got.numel(), 1
    return 1, got.numel()


def unwritten(got: torch.Tensor, bad: torch.Tensor) -> str | None:
    """Every wrong element is NaN: outputs start out as NaN in the tests, so they were never written."""
    if bad.any() and torch.isnan(got.double()[bad]).all():
        return (
            "every wrong element is NaN, which is what outputs hold before the op writes them: "
            "these elements were never written, or a NaN was computed there (0/0, inf - inf, sqrt of "
            "a negative)"
        )
    return None


def tail_columns(bad: torch.Tensor, rows: int, columns: int, what: str = "wrong") -> str | None:
    """Only a block of trailing columns is `what` (wrong, or NaN: never written): a loop or a
    vector width stops short of the row's end."""
    if columns < 2:
        return None
    bad_columns = bad.reshape(rows, columns).any(dim=0).nonzero().flatten()
    first = int(bad_columns.min())
    if first == 0 or (rows < 2 and first < 8):  # one row of a sum: its first element may be right by chance
        return None
    wrong_share = bad.reshape(rows, columns)[:, first:].double().mean().item()
    if wrong_share < MOSTLY:
        return None
    return (
        f"only the last columns are {what} ({first} to {columns - 1} of {columns}){_never(what)}: check where "
        "each loop over a row stops, and what handles the tail left after whole vectors or chunks"
    )


def head_columns(bad: torch.Tensor, rows: int, columns: int, what: str = "wrong") -> str | None:
    """Only the first columns of rows after the first are wrong: writes past the end of a row
    land at the start of the next one (a missing bounds check)."""
    if rows < 2 or columns < 2:
        return None
    grid = bad.reshape(rows, columns)
    bad_columns = grid.any(dim=0).nonzero().flatten()
    last = int(bad_columns.max())
    if grid[0].any() or last >= columns - 1 or grid[1:, : last + 1].double().mean().item() < MOSTLY:
        return None
    return (
        f"only the first columns (0 to {last}) of the rows after the first are {what}, and row 0 is not{_never(what)}: "
        "what lands there looks like writes running past the end of the row above; check which "
        "threads skip the columns past N"
    )


def periodic_columns(bad: torch.Tensor, rows: int, columns: int, what: str = "wrong") -> str | None:
    """The wrong columns repeat with a period (a warp, a block), right ones at the start of each:
    a loop strides by the wrong step, skipping part of every period."""
    columns_wrong = bad.reshape(rows, columns).any(dim=0)
    for period in PERIODS:
        if columns <= period:
            break
        per_period = columns_wrong[:period]
        if per_period.all() or not per_period.any():
            continue
        # every period alike, the last one (maybe cut short) too: a wrong tail alone is no period
        repeated = per_period.repeat(-(-columns // period))[:columns]
        if not torch.equal(repeated, columns_wrong):
            continue
        first = int(per_period.nonzero().min())
        if per_period[first:].all() and not per_period[:first].any():
            return (
                f"the {what} columns repeat every {period}: elements {first} to {period - 1} of each {period} "
                f"are {what}, 0 to {first - 1} are not{_never(what)}: check the step each thread's loop over "
                "the row takes"
            )
    return None


def late_rows(
    bad: torch.Tensor, rows: int, columns: int, inputs: dict | None = None, what: str = "wrong"
) -> str | None:
    """Only rows from some row on are `what`: the launch does not reach them, the row count is
    too small, or a row's offset wraps in 32 bits there."""
    if rows < 2:
        return None
    bad_rows = bad.reshape(rows, columns).any(dim=1).nonzero().flatten()
    first = int(bad_rows.min())
    # Rows 0 and 1 right may be chance (a wrong value equal to the right one); a grid that
    # stops short leaves far more.
    if first < 2 or bad.reshape(rows, columns)[first:].any(dim=1).double().mean().item() < MOSTLY:
        return None
    return f"only rows {first} and on are {what} (of {rows}){_never(what)}: {_rows_cut_at(first, columns, inputs)}"


def _rows_cut_at(first: int, columns: int, inputs: dict | None) -> str:
    """Why rows stop being handled at row `first`, as far as the shapes tell."""
    x = (inputs or {}).get("x")
    if isinstance(x, torch.Tensor) and x.dim() > 2 and first == x.shape[0]:
        return (
            f"{first} is x.size(0), and x has {x.dim()} dimensions: the rows are counted from its first "
            "dimension alone, not from every dimension before the last; check how the row count is computed"
        )
    wraps = offset_wraps(first, columns)
    if wraps:
        return wraps
    limit = (
        (f" {first} is a multiple of {GRID_Y_LIMIT}, the largest gridDim.y: a grid sized to the rows was capped")
        if first % GRID_Y_LIMIT == 0
        else ""
    )
    return f"the launch does not reach them.{limit} Check how the grid covers the rows"


def offset_wraps(row: int, columns: int) -> str | None:
    """Row `row` is the first whose offset row * columns passes the largest 32-bit int: a line
    where that is where the wrong rows start, else None."""
    if columns < 1 or not (row - 1) * columns < INT32_LIMIT <= row * columns:
        return None
    return (
        f"row {row} is the first whose offset, row * D = {row * columns}, is past 2^31 - 1, the largest "
        "32-bit int: an offset kept in 32 bits wraps there; check the type each row's offset is computed in"
    )


def _never(what: str) -> str:
    return ", never written" if what == "NaN" else ""


def _ratio(got: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor) -> torch.Tensor | None:
    """got / expected over the wrong elements whose expected value is not 0; None where fewer than 2."""
    expected64 = expected.double()[bad]
    usable = expected64.abs() > torch.finfo(torch.float64).tiny
    if usable.sum() < 2:
        return None
    return got.double()[bad][usable] / expected64[usable]


def same_factor(name: str, got: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor, inputs: dict) -> str | None:
    """Every wrong element is off by the same factor; sqrt((D-1)/D) is a variance divided by D - 1,
    -1 a sign."""
    ratio = _ratio(got, expected, bad)
    if ratio is None:
        return None
    factor = ratio.median().item()
    # the elements agree on the factor to within the output's rounding, and far better than it differs from 1
    spread = min(max(SAME_FACTOR_SPREAD, 2 * _eps(got)) * abs(factor), abs(factor - 1) / 4)
    if not torch.isfinite(ratio).all() or factor == 0 or (ratio - factor).abs().max().item() > spread:
        return None
    if abs(factor + 1) < SAME_FACTOR_SPREAD:
        return f"every wrong {name} has the right size and the wrong sign: check the sign of each term behind it"
    line = f"every wrong {name} is {factor:.6g} times the expected value"
    x = inputs.get("x")
    if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[-1] > 1:
        d = x.shape[-1]
        for ratio_name, candidate in (
            (f"sqrt((D-1)/D), with D = {d}: a variance divided by D - 1 instead of D", ((d - 1) / d) ** 0.5),
            (f"sqrt(D/(D-1)), with D = {d}: a variance divided by D - 1 instead of D", (d / (d - 1)) ** 0.5),
        ):
            if abs(factor - candidate) < 0.1 * abs(candidate - 1):
                return f"{line}, which is {ratio_name}"
    return f"{line}: a scale or a count behind {name} is off"


def _eps(t: torch.Tensor) -> float:
    return torch.finfo(t.dtype).eps if t.is_floating_point() else 0.0


def row_factor(name: str, got: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor, rows: int) -> str | None:
    """Each wrong row is the right row times a factor of its own: a quantity computed once per row
    (a sum, a max, a norm, a scale) is off, not the elements."""
    if rows < 2 or got.numel() // rows < 2:
        return None
    grid_got, grid_exp = got.double().reshape(rows, -1), expected.double().reshape(rows, -1)
    bad_rows = bad.reshape(rows, -1).any(dim=1)
    factors = []
    for row in bad_rows.nonzero().flatten()[:64].tolist():
        ratio = _ratio(grid_got[row], grid_exp[row], torch.ones_like(grid_exp[row], dtype=torch.bool))
        if ratio is None or not torch.isfinite(ratio).all():
            return None
        factor = ratio.median().item()
        if factor == 0 or (ratio - factor).abs().max().item() > SAME_FACTOR_SPREAD * abs(factor):
            return None
        factors.append(factor)
    if len(factors) < 2 or max(factors) - min(factors) <= SAME_FACTOR_SPREAD * max(abs(f) for f in factors):
        return None  # one factor for all: same_factor's
    return (
        f"each wrong row of {name} is the right row times a factor of its own ({min(factors):.4g} to "
        f"{max(factors):.4g}): what is computed once per row (a sum, a max, a norm, a scale) is off; "
        "check what goes into it"
    )


def row_offset(name: str, got: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor, rows: int) -> str | None:
    """Within each wrong row every element is off by the same amount: a term that is one value per
    row (a mean, a sum over the row) is missing or wrong."""
    columns = got.numel() // rows if rows else 0
    if columns < 2:
        return None
    error = (got.double() - expected.double()).reshape(rows, columns)
    bad_rows = bad.reshape(rows, columns).any(dim=1)
    if not bad_rows.any() or not torch.isfinite(error[bad_rows]).all():
        return None
    wrong = error[bad_rows]
    centre = wrong.median(dim=1, keepdim=True).values
    spread = (wrong - centre).abs().amax(dim=1)
    if (spread > SAME_FACTOR_SPREAD * centre.abs().flatten()).any() or (centre.flatten().abs() == 0).any():
        return None
    return (
        f"within each wrong row of {name} every element is off by the same amount (one amount per "
        "row): a term that is one value per row (a mean, a sum over the row) is missing or wrong"
    )


def all_zero(name: str, got: torch.Tensor, bad: torch.Tensor) -> str | None:
    """Every wrong element is 0: nothing was computed into them."""
    if bad.sum() < 2 or (got.double()[bad] != 0).any():
        return None
    return f"every wrong {name} is 0: nothing was computed into these elements, or it was multiplied away"


def cancellation(got: torch.Tensor, bad: torch.Tensor, rows: int, columns: int, inputs: dict) -> str | None:
    """The wrong rows are those whose mean is large next to their spread: E[x^2] - E[x]^2 cancels
    there. Where every row is such a row, so that none is right to compare with, whole rows of NaN
    scattered among them (a variance that came out negative) tell it."""
    x = inputs.get("x")
    if rows < 2 or not isinstance(x, torch.Tensor) or x.dim() < 2 or x.numel() // x.shape[-1] != rows:
        return None
    if x.shape[-1] < 2:  # one value a row has no spread
        return None
    bad_rows = bad.reshape(rows, columns).any(dim=1)
    if not bad_rows.any():
        return None
    x64 = x.double().reshape(rows, -1)
    condition = x64.mean(dim=1).abs() / x64.std(dim=1).clamp_min(torch.finfo(torch.float64).tiny)
    everywhere = _cancelled_everywhere(got, rows, columns, condition, x.dtype)
    if everywhere or bad_rows.all():
        return everywhere
    if condition[bad_rows].min() < CONDITION_GAP * condition[~bad_rows].median():
        return None
    return (
        "the wrong rows are the ones whose mean is large next to their spread (|mean| / std "
        f"{condition[bad_rows].min().item():.3g} and more, against {condition[~bad_rows].median().item():.3g} "
        "for the right rows): a variance as E[x^2] - E[x]^2 cancels there; check how the variance is computed"
    )


def _cancelled_everywhere(got: torch.Tensor, rows: int, columns: int, condition, dtype) -> str | None:
    """Every row so ill-conditioned that E[x^2] - E[x]^2, summed in the accumulation type, loses
    the whole variance (condition^2 * eps >= 1), and some rows NaN from end to end, among rows
    that are not (rows never reached are a block at the end)."""
    if not got.is_floating_point():
        return None
    accumulated = torch.float64 if dtype == torch.float64 else torch.float32
    if condition.min().item() ** 2 * torch.finfo(accumulated).eps < 1:
        return None
    nan = torch.isnan(got.double().reshape(rows, columns))
    whole = nan.all(dim=1)
    if not whole.any() or (nan.any(dim=1) & ~whole).any():  # NaN in part of a row: not a row's statistic
        return None
    first = int(whole.nonzero().min())
    if whole[first:].all():
        return None
    return (
        f"every row's mean is large next to its spread (|mean| / std {condition.min().item():.3g} and more), "
        f"and {int(whole.sum())} of the {rows} rows are NaN from end to end, among rows that are not: a variance "
        "as E[x^2] - E[x]^2 cancels there, and comes out negative in those rows; check how the variance is computed"
    )


def low_precision(got: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor, inputs: dict) -> str | None:
    """16-bit inputs, errors of about 16-bit rounding: sums or intermediate values kept in 16 bits;
    float64 inputs, errors of about float32's: a step of the float64 path taken in float32."""
    x = inputs.get("x")
    dtype = x.dtype if isinstance(x, torch.Tensor) else got.dtype
    if dtype == torch.float64:
        dtype = torch.float32
    elif dtype not in LOW_PRECISION:
        return None
    error = (got.double() - expected.double()).abs()[bad]
    scale = expected.double().abs().max().clamp_min(torch.finfo(torch.float64).tiny)
    if not torch.isfinite(error).all() or (error / scale).max().item() > 64 * torch.finfo(dtype).eps:
        return None
    return (
        f"the errors are a few roundings of {dtype} in size: values or sums kept in {dtype} on the "
        "way lose bits; check the type each sum and intermediate value is kept in"
    )


def integer_steps(name: str, got: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor) -> str | None:
    """An integer output off by exactly one step where wrong, or pinned at the INT8 limit."""
    if got.is_floating_point() or not bad.any():
        return None
    wrong, right = got.double()[bad], expected.double()[bad]
    if ((wrong - right).abs() == 1).all():
        return (
            f"every wrong {name} is one step from the expected value: check the rounding mode "
            "(half to even, as torch.round) and what is rounded"
        )
    if (wrong.abs() == INT8_LIMIT).all() and (right.abs() > INT8_LIMIT + 0.5).all():
        return f"every wrong {name} is at ±{INT8_LIMIT} where the expected value lies past it: check the scale"
    if (wrong.abs() == INT8_LIMIT).all():
        return (
            f"every wrong {name} is clamped at ±{INT8_LIMIT} where the expected value is inside: the scale is too small"
        )
    return None


def sixteen_bit_grid(values: torch.Tensor, uncertainty: torch.Tensor) -> torch.dtype | None:
    """The 16-bit type (bfloat16, else float16) on whose grid every one of `values` (float64,
    read back from a wrong output: a sum, say) lies within its `uncertainty`, counting only
    those where the grid's spacing is far coarser than that; None where fewer than 2 count or
    one is off the grid. A sum that lands on a 16-bit grid was kept in that type."""
    finite = torch.isfinite(values) & (values > 0)
    for dtype in (torch.bfloat16, torch.float16):
        info = torch.finfo(dtype)
        exponent = torch.floor(torch.log2(values.clamp(min=info.smallest_normal)))
        spacing = torch.exp2(exponent - (info.bits - 1 - _EXPONENT_BITS[dtype]))
        telling = finite & (values <= info.max) & (spacing > 8 * uncertainty)
        if telling.sum() < 2:
            continue
        off = (values - values.to(dtype).double()).abs() > uncertainty
        if not (off & telling).any():
            return dtype
    return None


def follows(got: torch.Tensor, model: torch.Tensor, atol: float, rtol: float) -> bool:
    """Whether `got` is within atol + rtol*|model| of `model` (float64) wherever the model is
    not NaN (NaN: no claim about that element), at some element at least."""
    if got.shape != model.shape:
        return False
    claimed = ~torch.isnan(model)
    if not claimed.any():
        return False
    gap = (got.double()[claimed] - model[claimed]).abs()
    return bool((gap <= atol + rtol * model[claimed].abs()).all())


def first_followed(got: torch.Tensor, models: dict[str, torch.Tensor], atol: float, rtol: float) -> list[str]:
    """[the name of the one of `models` ({line: values}) that `got` follows], or [] where none or
    more than one does."""
    found = [line for line, values in models.items() if follows(got, values, atol, rtol)]
    return found if len(found) == 1 else []


def model_reading(models: Callable, reference: Callable, outputs: tuple[str, ...], tolerance: Callable) -> Callable:
    """An Op.diagnose from models of the usual mistakes: models(output name, inputs) -> {line:
    the output as that mistake makes it, float64, NaN where the model claims nothing}. It names
    the one model a wrong output follows within the op's tolerance, where that model is wrong
    somewhere it claims (a model that is right wherever it claims anything tells nothing).
    reference, outputs, tolerance: the op's (course/ops.py)."""

    def diagnose(name: str, got: torch.Tensor, inputs: dict) -> list[str]:
        models_here = models(name, inputs) if name in outputs else {}
        if not models_here:
            return []
        allowed = tolerance(inputs)
        atol, rtol = allowed[name] if isinstance(allowed, dict) else allowed
        right = reference(inputs)[outputs.index(name)].double()
        telling = {line: values for line, values in models_here.items() if not follows(right, values, atol, rtol)}
        return first_followed(got, telling, atol, rtol)

    return diagnose


def followed_model(implied: torch.Tensor, allowed: torch.Tensor, models: dict[str, torch.Tensor]) -> str | None:
    """The one of `models` ({what it is: its values}) that `implied`, a quantity read back from a
    wrong output, is within `allowed` of at every element; None where none is, or more than one:
    a reading that fits two models names neither."""
    close = [name for name, values in models.items() if bool(((implied - values).abs() <= allowed).all())]
    return close[0] if len(close) == 1 else None


def one_strip(name: str, got: torch.Tensor, terms: torch.Tensor, atol: float, rtol: float) -> list[str]:
    """[a line] where `got`, a sum over the rows of `terms` [rows, columns] (a dbias, a dgamma),
    is the sum over only its first or only its last rows: one strip's partial sums, the other
    strips' not added up; else []."""
    rows = terms.shape[0]
    if rows < 2 or rows > STRIP_ROWS_READ:
        return []
    prefix = terms.double().cumsum(dim=0)
    total = prefix[-1]
    for count in range(1, rows):
        for which, start, values in (
            ("first", 0, prefix[count - 1]),
            ("last", rows - count, total - prefix[rows - count - 1]),
        ):
            if follows(got, values, atol, rtol):
                return [
                    f"{name} matches the sum over rows {start} to {start + count - 1} of {rows} only (the {which} "
                    f"{count}): the partial sums of the other rows' strips are not added in; check the loop "
                    "that adds the strips up"
                ]
    return []


def as_row_major(t: torch.Tensor) -> torch.Tensor:
    """The elements a kernel reads that indexes `t` as contiguous rows from its data pointer
    (data()[row * N + col]) whatever its strides; `t` itself where that reads past its storage."""
    if t.is_contiguous():
        return t
    end = (t.storage_offset() + t.numel()) * t.element_size()
    if end > t.untyped_storage().nbytes():
        return t
    return torch.as_strided(t, t.shape, torch.empty(t.shape, device="meta").stride(), t.storage_offset())


def strides_ignored(reference: Callable, inputs: dict, outputs, tolerances: dict, names) -> str | None:
    """Every wrong output is what the reference gives on the strided inputs read as contiguous
    rows (inputs: as the op saw them, laid out)."""
    strided = [k for k, v in inputs.items() if isinstance(v, torch.Tensor) and not v.is_contiguous()]
    if not strided:
        return None
    as_read = {k: as_row_major(v) if k in strided else v for k, v in inputs.items()}
    if all(as_read[k] is inputs[k] for k in strided):
        return None
    model = reference(as_read)
    # Read as rows, a strided tensor may yield the NaN in its gaps: then the model's NaN are a claim
    gaps = any(bool(torch.isnan(as_read[k]).any()) for k in strided if as_read[k].is_floating_point())
    for name, got, values, right in zip(names, outputs, model, reference(inputs)):
        allowed = tolerances[name]
        if not (
            follows(got, values.double(), *allowed)
            or follows(got, right.double(), *allowed)
            or (gaps and _nan_where(got, values.double(), allowed))
        ):
            return None
    return (
        f"the outputs are what the right op gives on {', '.join(strided)} read as contiguous rows from "
        "its data pointer: the strides are ignored; check how each element is indexed"
    )


def _nan_where(got: torch.Tensor, model: torch.Tensor, allowed: tuple[float, float]) -> bool:
    """got is NaN exactly where the model is (somewhere), and follows it elsewhere."""
    nan = torch.isnan(model)
    if got.shape != model.shape or not nan.any() or not torch.equal(torch.isnan(got.double()), nan):
        return False
    return bool(nan.all()) or follows(got, model, *allowed)


def swapped(names, outputs, expected, tolerances: dict) -> str | None:
    """An output holds what another output should hold (gradients returned in the wrong order)."""
    for i, (name, got) in enumerate(zip(names, outputs)):
        if follows(got, expected[i].double(), *tolerances[name]):
            continue
        for j, other in enumerate(names):
            if j != i and expected[j].shape == got.shape and follows(got, expected[j].double(), *tolerances[name]):
                return (
                    f"{name} holds what {other} should: check what is computed into {name}, and the order "
                    "the outputs (or gradients) are returned in"
                )
    return None


def repeated(names, outputs, previous) -> str | None:
    """Every wrong output is bit for bit what the previous call (on other values, in the same
    buffers or in others) returned: a result kept and handed out again."""
    same = [
        name
        for name, got, before in zip(names, outputs, previous)
        if isinstance(got, torch.Tensor) and got.numel() and got.shape == before.shape and torch.equal(got, before)
    ]
    if not same:
        return None
    return (
        f"{', '.join(same)} is bit for bit what the previous call returned, on other values: a result "
        "is kept and handed out again; check what the op keeps between calls"
    )


def _positions(bad: torch.Tensor, rows: int, columns: int, inputs: dict, what: str = "wrong") -> list[str | None]:
    """Where the `what` elements `bad` lie: a period, the tail, the head of rows, late rows."""
    periodic = periodic_columns(bad, rows, columns, what)  # its columns run to the row's end too
    return [
        periodic or tail_columns(bad, rows, columns, what),
        head_columns(bad, rows, columns, what),
        late_rows(bad, rows, columns, inputs, what),
    ]


def explain(name: str, got: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor, inputs: dict) -> list[str]:
    """The patterns that match the wrong elements `bad` of output `name`. Where only some of
    them are NaN, where the NaN lie is read too: the elements never written show the shape of
    a loop or a launch that the wrong values around them hide."""
    if got.shape != expected.shape or not bad.any():
        return []
    nan_line = unwritten(got, bad)
    rows, columns = _rows_and_columns(got, inputs)
    # NaN in whole rows among right ones is a pattern of where, too
    lines = [nan_line, *_positions(bad, rows, columns, inputs), cancellation(got, bad, rows, columns, inputs)]
    if nan_line is None:
        nan = bad & torch.isnan(got.double()) if got.is_floating_point() else None
        if nan is not None and nan.any():
            lines += _positions(nan, rows, columns, inputs, "NaN")
        systematic = [
            integer_steps(name, got, expected, bad),
            all_zero(name, got, bad),
            same_factor(name, got, expected, bad, inputs),
            row_factor(name, got, expected, bad, rows),
            row_offset(name, got, expected, bad, rows),
        ]
        # roundings are noise: an error with a pattern of its own is no rounding
        lines += systematic if any(systematic) else [low_precision(got, expected, bad, inputs)]
    return [line for line in lines if line]
