"""Hidden cases reach past every size the public ones use: for each unit's op, backend and
device, some hidden values case has more rows than any public one, and some more columns. An
op fitted to the public sizes (a fixed block of columns, rows that fit one grid) then loses."""

import importlib
import math
from collections import defaultdict

import pytest
import torch

from course.cases import make_input_sets
from course.judge import judge
from course.spec import units

# Ops whose verdict does not rest on the size of their inputs: they check how the op is
# registered, traced or named (opcheck's schema and fake kernel, torch.compile's graph, a
# state_dict's keys, how a package installs and imports, what its CI file says), and a larger
# size only costs another compile.
SIZE_FREE_OPS = {"opcheck", "compiled", "state_dict", "fresh_import", "other_torch", "ci_workflow"}


def rows_and_columns(shape) -> tuple[int, int]:
    """A shape as the kernels see it: every dimension but the last is a row."""
    return math.prod(shape[:-1]), shape[-1]


def _sized_cases(unit) -> dict[tuple, dict[bool, list]]:
    """{(op, backend, device): {hidden?: [(rows, columns) of each values case]}}."""
    public = {case.name for case in unit.tests(hidden=False).CASES}
    sizes = defaultdict(lambda: {False: [], True: []})
    for case in unit.tests().CASES:
        shape = case.params.get("shape")
        op = case.params.get("op", "")
        if case.kind != "values" or shape is None or op in SIZE_FREE_OPS:
            continue  # cases sized otherwise (day04's 4 GiB ones) build their shape elsewhere
        key = (op, case.params.get("backend", ""), case.device)
        sizes[key][case.name not in public].append(rows_and_columns(shape))
    return sizes


def reach_gaps(unit) -> list[str]:
    """Each (op, backend, device) of the unit whose hidden cases stay within the public rows or
    the public columns."""
    gaps = []
    for key, by_hidden in sorted(_sized_cases(unit).items()):
        public, hidden = by_hidden[False], by_hidden[True]
        if not public:
            continue
        for axis, name in enumerate(("rows", "columns")):
            largest = max(size[axis] for size in public)
            if not any(size[axis] > largest for size in hidden):
                gaps.append(
                    f"op {key[0] or '-'}, backend {key[1] or '-'}, {key[2]}: no hidden case has more {name} than {largest}"
                )
    return gaps


@pytest.mark.parametrize("unit", [u for u in units.all_units() if u.has_tests()], ids=lambda u: u.name)
def test_hidden_cases_reach_past_the_public_sizes(unit):
    gaps = reach_gaps(unit)
    assert not gaps, f"{unit.name}:\n" + "\n".join(gaps)


def test_the_walk_finds_a_gap():
    """The check can fail: day01 without its hidden CPU cases has none past the public sizes."""
    unit = units.load("day01_relu_bias")

    class Trimmed:
        name = unit.name

        @staticmethod
        def tests(hidden=True):
            suite = unit.tests(hidden=hidden)
            if not hidden:
                return suite
            public = {c.name for c in unit.tests(hidden=False).CASES}
            kept = [c for c in suite.CASES if c.name in public or c.device != "cpu"]
            return type("Suite", (), {"CASES": kept})

    assert "op -, backend -, cpu: no hidden case has more rows than 16" in reach_gaps(Trimmed)
    assert rows_and_columns((8, 4, 16)) == (32, 16)


# Units whose kernels find a row by its offset, row * D: some CUDA case has more than 2^31
# elements, where that offset wraps in 32 bits (the lesson of day02's kernel, and day04's).
ROW_OFFSET_UNITS = ("day02_layernorm_forward", "day04_layernorm_edge_cases")


def _elements(case) -> int:
    """A case's elements: its shape's, or what its declared memory holds (x and an output of x's size)."""
    if case.elements is not None:
        return case.elements
    return case.gpu_memory // (2 * case.params.get("dtype", torch.float32).itemsize)


@pytest.mark.parametrize("name", ROW_OFFSET_UNITS)
def test_a_hidden_cuda_case_reaches_past_2_31_elements(name):
    suite = units.load(name).tests()
    past = [c for c in suite.CASES if c.kind == "values" and c.device == "cuda" and _elements(c) > 2**31]
    assert past, f"{name}: no CUDA case past 2^31 elements"
    # what the plan skips a GPU too small for (autograder/stages/plan.py): x and an output of its size
    assert all(c.gpu_memory >= 2 * 2**31 * c.params.get("dtype", torch.float32).itemsize for c in past)


def test_day02s_case_past_2_31_elements_is_made_and_judged_from_a_tile():
    """Its inputs are a tile; the parent's reference is its last rows, rebuilt from the tile, and
    a row read through a 32-bit offset (row 32768's wraps to the start of x) fails."""
    suite = units.load("day02_layernorm_forward").tests()
    tiled_rows = importlib.import_module("..common.tiled_rows", suite.__package__)
    layer_norm64 = importlib.import_module("..common.layernorm_tests", suite.__package__).layer_norm64
    case = next(c for c in suite.CASES if c.name == "cuda_fp32_past_2_31")
    assert case.name not in {c.name for c in units.load("day02_layernorm_forward").tests(hidden=False).CASES}
    assert case.gpu_memory > 15 * 2**30  # more than a T4 has: skipped there
    (inputs,) = make_input_sets(suite, case, seed=1)
    assert sum(v.numel() * v.element_size() for v in inputs.values() if isinstance(v, torch.Tensor)) < 2**24
    rows, cols = case.params["shape"]
    x = tiled_rows.last_rows(inputs["tile"], rows)
    right = tuple(t.float() for t in layer_norm64(x, inputs["gamma"].double(), inputs["beta"].double()))
    result = {"outputs": [right], "output_devices": [("cuda:0",) * 3]}
    assert judge(suite, case, [inputs], result).passed
    wrapped = x.clone()
    wrapped[-1] = inputs["tile"].double()[0]  # row 32768 at offset (32768 * 65536) mod 2^32 = 0: row 0
    wrong = tuple(t.float() for t in layer_norm64(wrapped, inputs["gamma"].double(), inputs["beta"].double()))
    verdict = judge(suite, case, [inputs], {**result, "outputs": [wrong]})
    assert not verdict.passed and "y:" in verdict.message, verdict.message
