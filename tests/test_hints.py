"""Each mismatch pattern against a synthetic wrong output, and against outputs it must not name."""

import torch

from course import hints
from course.cases import Case
from course.judge import PATTERN, _with_hint, wrong_elements

EPS = 1e-5


def _explain(name, got, expected, inputs, atol=1e-6, rtol=1e-6):
    return hints.explain(name, got, expected, wrong_elements(got, expected, atol, rtol), inputs)


def _rstd(x, correction):
    return 1 / torch.sqrt(x.double().var(dim=-1, correction=correction) + EPS)


def test_a_variance_divided_by_d_minus_1_is_named_with_its_factor():
    x = torch.randn(64, 100, generator=torch.Generator().manual_seed(0))
    lines = _explain("rstd", _rstd(x, 1).float(), _rstd(x, 0), {"x": x}, rtol=1e-5)
    assert len(lines) == 1 and "sqrt((D-1)/D), with D = 100" in lines[0], lines


def test_a_factor_that_is_not_the_variances_is_reported_without_a_cause():
    expected = torch.rand(8, 16, dtype=torch.float64) + 0.5
    lines = _explain("y", (expected * 1.5).float(), expected, {"x": torch.randn(8, 16)})
    assert len(lines) == 1 and lines[0].startswith("every wrong y is 1.5 times the expected value:"), lines
    assert "D - 1" not in lines[0]


def test_only_the_last_columns_wrong_is_a_tail():
    expected = torch.randn(8, 100, dtype=torch.float64)
    got = expected.clone()
    got[:, 96:] += 1
    lines = _explain("y", got, expected, {"x": torch.randn(8, 100)})
    assert len(lines) == 1 and "only the last columns are wrong (96 to 99 of 100)" in lines[0], lines


def test_rows_from_65535_on_never_written_name_the_grid_limit():
    expected = torch.randn(70000, 4, dtype=torch.float64)
    got = expected.clone()
    got[65535:] = float("nan")
    lines = _explain("y", got, expected, {"x": torch.randn(70000, 4)})
    assert len(lines) == 2, lines
    assert "never written" in lines[0]
    assert "only rows 65535 and on are wrong" in lines[1] and "largest gridDim.y" in lines[1]


def test_scattered_nan_is_unwritten_and_nothing_else():
    expected = torch.randn(32, 32, dtype=torch.float64)
    got = expected.clone()
    got[torch.rand(32, 32, generator=torch.Generator().manual_seed(1)) < 0.3] = float("nan")
    lines = _explain("y", got, expected, {"x": torch.randn(32, 32)})
    assert len(lines) == 1 and "never written" in lines[0], lines


def test_errors_on_the_rows_with_a_large_mean_are_cancellation():
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(16, 64, generator=generator, dtype=torch.float64)
    x[::2] += 1e4  # every other row: mean 1e4, spread 1
    expected = _rstd(x, 0)
    got = expected.clone()
    got[::2] *= 1 + torch.rand(8, generator=generator, dtype=torch.float64)  # wrong, by differing amounts
    lines = _explain("rstd", got, expected, {"x": x})
    assert len(lines) == 1 and "E[x^2] - E[x]^2" in lines[0], lines


def test_errors_of_a_few_bf16_roundings_are_low_precision_and_fp32_ones_are_not():
    generator = torch.Generator().manual_seed(3)
    expected = torch.randn(16, 64, generator=generator, dtype=torch.float64)
    noise = 4 * torch.finfo(torch.bfloat16).eps * torch.randn(16, 64, generator=generator, dtype=torch.float64)
    got = expected + noise * expected.abs().max()
    for dtype, named in ((torch.bfloat16, True), (torch.float32, False)):
        lines = _explain("y", got, expected, {"x": torch.randn(16, 64).to(dtype)})
        assert any("roundings of torch.bfloat16" in line for line in lines) == named, (dtype, lines)


def test_a_right_output_explains_nothing():
    expected = torch.randn(8, 8, dtype=torch.float64)
    assert _explain("y", expected.clone(), expected, {"x": torch.randn(8, 8)}) == []


def test_the_cases_own_hint_stands_only_where_no_pattern_matched():
    case = Case("cpu_fp32_tail", "cpu_values", hint="does every loop run to j < D?")
    assert _with_hint(["y: 3 of 8 elements differ"], case)[-1] == "hint: does every loop run to j < D?"
    explained = ["y: 3 of 8 elements differ", PATTERN + "every wrong y is 0.99 times the expected value"]
    assert _with_hint(explained, case) == explained


def test_a_reading_is_named_by_the_one_model_it_follows_and_by_none_where_two_fit():
    implied = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    allowed = torch.full_like(implied, 1e-6)
    models = {"right": implied + 0.1, "slip": implied + 1e-7, "other": implied * 2}
    assert hints.followed_model(implied, allowed, models) == "slip"
    assert hints.followed_model(implied, allowed, {**models, "twin": implied - 1e-7}) is None
    assert hints.followed_model(implied, allowed, {"right": implied + 0.1}) is None
    implied[1] = float("nan")  # an element never written follows no model
    assert hints.followed_model(implied, allowed, models) is None


def _grid(rows=16, columns=300, seed=4):
    return torch.randn(rows, columns, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_writes_past_a_rows_end_show_at_the_start_of_the_next_row():
    expected = _grid()
    got = expected.clone()
    got[1:, :20] += 3
    lines = _explain("y", got, expected, {"x": expected.float()})
    assert len(lines) == 1 and "only the first columns (0 to 19) of the rows after the first" in lines[0], lines


def test_columns_wrong_in_every_period_name_the_period_not_a_tail():
    expected = _grid(columns=1024)
    got = expected.clone()
    got.view(16, 4, 256)[:, :, 32:] = float("nan")
    lines = _explain("y", got, expected, {"x": expected.float()})
    assert any("repeat every 256: elements 32 to 255" in line for line in lines), lines
    assert not any("only the last columns" in line for line in lines), lines


def test_a_factor_per_row_and_an_offset_per_row_are_told_apart():
    expected = _grid(rows=8, columns=64) + 5
    factors, offsets = torch.linspace(1.1, 1.8, 8, dtype=torch.float64)[:, None], torch.arange(1.0, 9.0)[:, None]
    scaled = _explain("y", expected * factors, expected, {"x": expected.float()})
    shifted = _explain("dx", expected + offsets.double(), expected, {"x": expected.float()})
    assert len(scaled) == 1 and "each wrong row of y is the right row times a factor of its own" in scaled[0], scaled
    assert len(shifted) == 1 and "every element is off by the same amount (one amount per row)" in shifted[0], shifted


def test_a_wrong_sign_and_integer_steps_are_named():
    expected = _grid(rows=4, columns=32)
    assert "the wrong sign" in _explain("dx", -expected, expected, {"x": expected.float()})[0]
    q = torch.randint(-100, 100, (4, 32), generator=torch.Generator().manual_seed(5), dtype=torch.int8)
    got = q.clone()
    got[0, :5] += 1
    lines = _explain("q", got, q.double(), {"x": expected.float()}, atol=0, rtol=0)
    assert len(lines) == 1 and "one step from the expected value" in lines[0], lines


def test_a_sum_over_its_last_rows_only_is_one_strip():
    terms = _grid(rows=40, columns=8)
    line = hints.one_strip("dgamma", terms[24:].sum(dim=0), terms, 1e-9, 0.0)
    assert line and "rows 24 to 39 of 40 only (the last 16)" in line[0], line
    assert hints.one_strip("dgamma", terms.sum(dim=0) + 1, terms, 1e-9, 0.0) == []


def test_strides_ignored_swapped_outputs_and_a_kept_result_read_the_whole_call():
    x = _grid(rows=6, columns=10).t().contiguous().t()  # column-major storage
    reference = lambda inputs: (inputs["x"].double() * 2,)  # noqa: E731
    as_read = (torch.as_strided(x, x.shape, (10, 1)) * 2,)
    tolerances = {"y": (1e-9, 0.0)}
    assert "x read as contiguous rows" in hints.strides_ignored(reference, {"x": x}, as_read, tolerances, ("y",))
    assert hints.strides_ignored(reference, {"x": x}, (x * 3,), tolerances, ("y",)) is None
    a, b = _grid(rows=1, columns=8, seed=6)[0], _grid(rows=1, columns=8, seed=7)[0]
    both = {"da": (1e-9, 0.0), "db": (1e-9, 0.0)}
    assert hints.swapped(("da", "db"), (b, a), (a, b), both).startswith("da holds what db should")
    assert hints.swapped(("da", "db"), (a, b + 1), (a, b), both) is None
    assert "previous call" in hints.repeated(("y",), (a,), (a.clone(),))
    assert hints.repeated(("y",), (a,), (b,)) is None


def test_a_model_right_wherever_it_claims_names_nothing():
    x = _grid(rows=4, columns=8)
    claims_little = torch.full_like(x, float("nan"))
    claims_little[0] = x[0]  # right on row 0, no claim elsewhere
    models = lambda name, inputs: {"wrong everywhere": x + 1, "claims only a right row": claims_little}  # noqa: E731
    diagnose = hints.model_reading(models, lambda inputs: (x,), ("y",), lambda inputs: (1e-9, 0.0))
    assert diagnose("y", x + 1, {}) == ["wrong everywhere"]
    assert diagnose("y", x * 5, {}) == []


def test_where_the_nan_lie_is_read_where_the_other_elements_are_wrong_too():
    expected = _grid(rows=8, columns=100)
    got = expected * 1.1
    got[:, 96:] = float("nan")
    lines = _explain("y", got, expected, {"x": expected.float()})
    assert any("only the last columns are NaN (96 to 99 of 100), never written" in line for line in lines), lines
    got = expected * 1.1
    got.view(8, 4, 25)[:, :, 20:] = float("nan")  # not a period of PERIODS: no period, no tail
    assert not any("NaN" in line for line in _explain("y", got, expected, {"x": expected.float()}))


def test_a_last_column_alone_is_a_tail_not_a_period():
    expected = _grid(rows=8, columns=96)
    got = expected.clone()
    got[:, -1] = float("nan")
    lines = _explain("dx", got, expected, {"x": expected.float()})
    assert any("only the last columns are wrong (95 to 95 of 96)" in line for line in lines), lines
    assert not any("repeat every" in line for line in lines), lines


def test_rows_cut_at_x_size_0_or_at_a_32_bit_offset_are_named_so():
    expected = _grid(rows=30, columns=64)
    got = expected.clone()
    got[2:] = float("nan")
    counted = _explain("y", got.view(2, 3, 5, 64), expected.view(2, 3, 5, 64), {"x": torch.zeros(2, 3, 5, 64)})
    assert any("2 is x.size(0)" in line for line in counted), counted
    flat = _explain("y", got, expected, {"x": torch.zeros(30, 64)})
    assert any("the launch does not reach them" in line for line in flat), flat
    assert "wraps" in hints.offset_wraps(32768, 65536) and hints.offset_wraps(32767, 65536) is None


def test_whole_nan_rows_scattered_among_ill_conditioned_rows_are_cancellation():
    generator = torch.Generator().manual_seed(8)
    x = 1e4 + 1e-2 * torch.randn(16, 64, generator=generator, dtype=torch.float64)
    expected = _rstd(x, 0)[:, None] * (x - x.mean(dim=1, keepdim=True))
    got = expected.clone()
    got[1::3] = float("nan")
    lines = _explain("y", got, expected, {"x": x.float()})
    assert any("E[x^2] - E[x]^2 cancels there, and comes out negative" in line for line in lines), lines
    got = expected.clone()
    got[10:] = float("nan")  # rows never reached: a block at the end
    assert not any("E[x^2]" in line for line in _explain("y", got, expected, {"x": x.float()}))
    well = torch.randn(16, 64, generator=generator, dtype=torch.float64)
    got = well.clone()
    got[1::3] = float("nan")
    assert not any("E[x^2]" in line for line in _explain("y", got, well, {"x": well.float()}))


def test_a_sum_read_back_onto_a_16_bit_grid_names_the_type():
    sums = torch.tensor([4092.0, 4100.0, 5000.0], dtype=torch.float64)  # float16 values, and no bfloat16 ones
    assert hints.sixteen_bit_grid(sums, sums * 1e-6) == torch.float16
    assert hints.sixteen_bit_grid(sums + 0.5, sums * 1e-6) is None
    assert hints.sixteen_bit_grid(sums[:1], sums[:1] * 1e-6) is None  # one value could be chance
    assert hints.sixteen_bit_grid(torch.tensor([4096.0, 5120.0]), torch.tensor([1e-3, 1e-3])) == torch.bfloat16


def test_a_factor_as_close_to_1_as_the_rows_disagree_is_rounding_not_a_factor():
    generator = torch.Generator().manual_seed(9)
    expected = torch.rand(64, generator=generator, dtype=torch.float64) + 1
    noise = 1 + 1e-5 + 2e-5 * torch.randn(64, generator=generator, dtype=torch.float64)  # roundings, a little biased
    lines = _explain("rstd", (expected * noise).float(), expected, {"x": torch.randn(64, 16).half()}, rtol=1e-5)
    assert not any("times the expected value" in line for line in lines), lines
    assert any("roundings of torch.float16" in line for line in lines), lines
