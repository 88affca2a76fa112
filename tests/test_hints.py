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
    assert lines == ["every wrong y is 1.5 times the expected value"]


def test_only_the_last_columns_wrong_is_a_tail():
    expected = torch.randn(8, 100, dtype=torch.float64)
    got = expected.clone()
    got[:, 96:] = 0
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
