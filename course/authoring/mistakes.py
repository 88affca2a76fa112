"""The instructor kit's catalogue of common mistakes: each of a unit's mutants (the wrong
submissions the grader is tested against, mutants.toml), the tests it loses and what the
grader tells the student under each. Generated with the notebooks, so it cannot go stale.
"""

from __future__ import annotations

import os

from course.spec import mutants
from course.spec.units import Unit


def mistakes_path(unit: Unit) -> str:
    return os.path.join(unit.repo, "docs", "instructor", f"{unit.name}_mistakes.md")


def mistakes_text(unit: Unit) -> str:
    """The unit's catalogue as markdown; '' for a unit without mutants."""
    from course.cases import needed  # imports torch: only where a unit has mutants

    wrong = mutants.load(unit)
    if not wrong:
        return ""
    suite = unit.tests(hidden=True)
    cases = suite.CASES
    names = [case.name for case in cases]
    hints = {case.name: case.hint for case in cases}
    lines = [
        f"# {unit.title}: common mistakes and what the grader says",
        "",
        f"Generated from `solutions/{unit.name}/mutants.toml` and the unit's hidden suite (run "
        "`python -m course.authoring.generate`). Each entry is a wrong submission the test suite "
        "grades on every change: the mistake, every test it loses, and the hint the student "
        "reads under a lost test, besides what went wrong there (the mismatch, the error or the crash): "
        "where the grader reads the cause from the wrong outputs, that reading (the case's own hint "
        "is then not shown), checked against the mutant by tests/test_autograder.py.",
        "",
    ]
    for mutant in wrong.values():
        lost = sorted(mutant.expected_losses(names), key=names.index)
        where = "a GPU" if mutant.gpu_only else "the CPU and a GPU"
        if mutant.min_gpus > 1:
            where = f"{mutant.min_gpus} GPUs"
        about = mutant.about.rstrip(".")
        lines += [
            f"## {mutant.name}",
            "",
            about[:1].upper() + about[1:] + ".",
            "",
            f"Seen on {where}; loses {len(lost)} test{'s' if len(lost) != 1 else ''}.",
            "",
        ]
        said: dict[str, list[str]] = {}
        for name in lost:
            case = cases[names.index(name)]
            if case.kind == "perf" and set(needed(case, cases)) & set(lost):
                hint = "not timed: the correctness cases it needs were lost first"
            elif mutant.diagnosis_for(name):
                shown = mutant.diagnosis_for(name)
                hint = f"what it looks like: {shown}" if _read(suite, case) else shown
            else:
                hint = hints.get(name) or "(no hint: the mismatch alone)"
            said.setdefault(hint, []).append(name)
        for hint, tests in said.items():
            lines.append(f"- {', '.join(f'`{t}`' for t in tests)}: {hint}")
        lines.append("")
    return "\n".join(lines)


def _read(suite, case) -> bool:
    """Whether the grader reads the case's wrong outputs for their cause (course/hints.py, an
    op's `diagnose`): a values case of an op judged against a reference, not against itself.
    What that reading says stands in for the case's hint."""
    op = getattr(suite, "OPS", {}).get(case.params.get("op", ""))  # a suite may name it in the inputs only
    return case.kind in ("values", "perf") and not getattr(op, "against_itself", False)
