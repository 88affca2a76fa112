"""What the shape of a wrong output says about its cause.

A case's fixed hint guesses the mistake from the case's purpose, and can point the wrong way:
a variance divided by D - 1 fails a "tail" case too. These read the mismatch itself: which
elements are wrong, by how much, and how that lines up with the inputs. Each returns a line
or None; `explain` returns the lines of those that match. A unit reads its own mistakes with
`followed_model`, from an op's `diagnose` (course/ops.py).
"""

from __future__ import annotations

import torch

GRID_Y_LIMIT = 65535  # gridDim.y and gridDim.z can be no larger
SAME_FACTOR_SPREAD = 1e-3  # relative spread of got / expected that counts as one factor
MOSTLY = 0.5  # the share of a region that must be wrong for "this region is wrong"
CONDITION_GAP = 10.0  # how much worse conditioned the wrong rows are than the right ones
LOW_PRECISION = {torch.float16, torch.bfloat16}


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
            "these elements were never written"
        )
    return None


def tail_columns(bad: torch.Tensor, rows: int, columns: int) -> str | None:
    """Only a block of trailing columns is wrong: a loop or a vector width stops short of the row's end."""
    if columns < 2:
        return None
    bad_columns = bad.reshape(rows, columns).any(dim=0).nonzero().flatten()
    first = int(bad_columns.min())
    if first == 0:
        return None
    wrong_share = bad.reshape(rows, columns)[:, first:].double().mean().item()
    if wrong_share < MOSTLY:
        return None
    return (
        f"only the last columns are wrong ({first} to {columns - 1} of {columns}): a loop stops "
        f"before the end of the row, or a tail after whole vectors or chunks is left out"
    )


def late_rows(bad: torch.Tensor, rows: int, columns: int) -> str | None:
    """Only rows from some row on are wrong: the launch does not reach them."""
    if rows < 2:
        return None
    bad_rows = bad.reshape(rows, columns).any(dim=1).nonzero().flatten()
    first = int(bad_rows.min())
    if first == 0 or bad.reshape(rows, columns)[first:].any(dim=1).double().mean().item() < MOSTLY:
        return None
    limit = (
        (f" {first} is a multiple of {GRID_Y_LIMIT}, the largest gridDim.y: a grid sized to the rows was capped")
        if first % GRID_Y_LIMIT == 0
        else ""
    )
    return (
        f"only rows {first} and on are wrong (of {rows}): the grid does not reach them.{limit} "
        "Loop over rows with a grid-sized stride, or size the grid from the row count"
    )


def same_factor(name: str, got: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor, inputs: dict) -> str | None:
    """Every wrong element is off by the same factor; sqrt((D-1)/D) is a variance divided by D - 1."""
    expected64 = expected.double()[bad]
    usable = expected64.abs() > torch.finfo(torch.float64).tiny
    if usable.sum() < 2:
        return None
    ratio = got.double()[bad][usable] / expected64[usable]
    factor = ratio.median().item()
    if (
        not torch.isfinite(ratio).all()
        or factor <= 0
        or (ratio - factor).abs().max().item() > SAME_FACTOR_SPREAD * factor
    ):
        return None
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
    return line


def cancellation(bad: torch.Tensor, rows: int, columns: int, inputs: dict) -> str | None:
    """The wrong rows are those whose mean is large next to their spread: E[x^2] - E[x]^2 cancels there."""
    x = inputs.get("x")
    if rows < 2 or not isinstance(x, torch.Tensor) or x.dim() < 2 or x.numel() // x.shape[-1] != rows:
        return None
    bad_rows = bad.reshape(rows, columns).any(dim=1)
    if bad_rows.all() or not bad_rows.any():
        return None
    x64 = x.double().reshape(rows, -1)
    condition = x64.mean(dim=1).abs() / x64.std(dim=1).clamp_min(torch.finfo(torch.float64).tiny)
    if condition[bad_rows].min() < CONDITION_GAP * condition[~bad_rows].median():
        return None
    return (
        "the wrong rows are the ones whose mean is large next to their spread (|mean| / std "
        f"{condition[bad_rows].min().item():.3g} and more, against {condition[~bad_rows].median().item():.3g} "
        "for the right rows): E[x^2] - E[x]^2 cancels there; subtract the mean before squaring"
    )


def low_precision(got: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor, inputs: dict) -> str | None:
    """16-bit inputs, errors of about 16-bit rounding: sums or intermediate values kept in 16 bits."""
    x = inputs.get("x")
    dtype = x.dtype if isinstance(x, torch.Tensor) else got.dtype
    if dtype not in LOW_PRECISION:
        return None
    error = (got.double() - expected.double()).abs()[bad]
    scale = expected.double().abs().max().clamp_min(torch.finfo(torch.float64).tiny)
    if not torch.isfinite(error).all() or (error / scale).max().item() > 64 * torch.finfo(dtype).eps:
        return None
    return (
        f"the errors are a few roundings of {dtype} in size: values or sums kept in {dtype} on the "
        "way lose bits; widen to float32 (the op-math type) and round once, at the store"
    )


def followed_model(implied: torch.Tensor, allowed: torch.Tensor, models: dict[str, torch.Tensor]) -> str | None:
    """The one of `models` ({what it is: its values}) that `implied`, a quantity read back from a
    wrong output, is within `allowed` of at every element; None where none is, or more than one:
    a reading that fits two models names neither."""
    close = [name for name, values in models.items() if bool(((implied - values).abs() <= allowed).all())]
    return close[0] if len(close) == 1 else None


def explain(name: str, got: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor, inputs: dict) -> list[str]:
    """The patterns that match the wrong elements `bad` of output `name`."""
    if got.shape != expected.shape or not bad.any():
        return []
    nan_line = unwritten(got, bad)
    rows, columns = _rows_and_columns(got, inputs)
    lines = [nan_line, tail_columns(bad, rows, columns), late_rows(bad, rows, columns)]
    if nan_line is None:
        lines += [
            same_factor(name, got, expected, bad, inputs),
            cancellation(bad, rows, columns, inputs),
            low_precision(got, expected, bad, inputs),
        ]
    return [line for line in lines if line]
