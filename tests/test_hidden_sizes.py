"""Hidden cases reach past every size the public ones use: for each unit's op, backend and
device, some hidden values case has more rows than any public one, and some more columns. An
op fitted to the public sizes (a fixed block of columns, rows that fit one grid) then loses."""

import math
from collections import defaultdict

import pytest

from course.spec import units

# Ops whose verdict does not rest on the size of their inputs: they check how the op is
# registered, traced or named (opcheck's schema and fake kernel, torch.compile's graph, a
# state_dict's keys), and a larger size only costs another compile.
SIZE_FREE_OPS = {"opcheck", "compiled", "state_dict"}


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
