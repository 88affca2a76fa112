"""Generate what students and instructors get from solutions/ (the one source of truth).

    python -m course.authoring.generate          write src_templates/ and notebooks/
    python -m course.authoring.generate --check  exit 1, naming each stale or missing file
    python -m course.authoring.generate --repo DIR   another course folder (DIR/solutions/...)

For each unit: src_templates/<unit>/ (starter sources), notebooks/<unit>.ipynb
(student), notebooks/instructor/<unit>.ipynb (solutions filled in; kept with the outputs of a
GPU run, `scripts/gpu_check.sh notebook`, while its cells are current) and, for the instructor
kit, docs/instructor/<unit>_mistakes.md (its mutants: the mistake, the tests lost, the hints)
and docs/instructor/<unit>_pacing.md (its sections, what each asks and an estimate of its time).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import nbformat

from course.authoring import runtime_package
from course.authoring.mistakes import mistakes_path, mistakes_text
from course.authoring.pacing import pacing_path, pacing_text
from course.lab import TESTS
from course.notebook import SOURCE_MAGIC
from course.spec import mutants, units
from course.spec.lesson import ANSWER_PROMPT, has_lesson, lesson_parts
from course.spec.regions import stubs
from course.spec.units import Unit


def _runtime_cell(release: str) -> str:
    """The notebook's first cell: the course runtime at the version this notebook was generated
    with, installed from the release's runtime/ folder (or COURSE_RELEASE, a local one) unless
    that version is importable already."""
    version = runtime_package.runtime_version()
    wheel = runtime_package.wheel_name("{quote(RUNTIME) if '://' in where else RUNTIME}")
    return f"""#@title Course runtime (run it; no need to read it)
RUNTIME = {version!r}  # offline: set COURSE_RELEASE to a release's runtime/ folder
import importlib, os, subprocess, sys
from urllib.parse import quote
def _version():
    try: return importlib.import_module("course").__version__
    except ImportError: return None
if _version() != RUNTIME:
    where = os.environ.get("COURSE_RELEASE", {release!r})
    wheel = f"{{where}}/{wheel}"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-U", "--force-reinstall", wheel],
                   check=True)
    [sys.modules.pop(name) for name in list(sys.modules) if name.partition(".")[0] == "course"]
    importlib.invalidate_caches()
    assert _version() == RUNTIME, f"course runtime {{RUNTIME}} did not install from {{wheel}}"
print("course runtime", RUNTIME)"""


def _directive_cell(unit: Unit, name: str, argument: str, solved: bool, release: str):
    if name == "runtime":
        return "code", _runtime_cell(release), {"cellView": "form"}
    if name == "setup":
        return "code", "from course.notebook import setup\n\nsetup()", {}
    if name == "source":
        if argument not in unit.files:
            raise ValueError(f"{unit.name}/lesson.md: source {argument!r} is not one of the unit's files")
        text = unit.solution(argument) if solved else unit.template(argument)
        return "code", f"{SOURCE_MAGIC} {unit.name}/{argument}\n{text}", {}
    if name == "build":
        return "code", f"from course.notebook import build_unit\n\next = build_unit({_plan_arguments(unit)})", {}
    if name == "tests":
        files = ", ".join(repr(f) for f in unit.files)
        return (
            "code",
            f"from course.notebook import run_public_tests\n\nrun_public_tests({unit.name!r}, ext, [{files}])",
            {},
        )
    if name == "submit":
        files = ", ".join(repr(f) for f in unit.files)
        return (
            "code",
            (
                "from course.notebook import submit\n\n"
                'STUDENT = ""  # your student id or email, as the course\'s roster has it\n'
                f"submit({unit.name!r}, [{files}], student=STUDENT)"
            ),
            {},
        )
    if name == "answer":
        return "markdown", f"{ANSWER_PROMPT}\n\n", {"course": {"answer": argument}}
    if name == "thresholds":
        return "markdown", thresholds_text(unit), {}
    if name == "bug":
        return "code", _bug_cell(unit, argument, solved), {}
    raise ValueError(f"{unit.name}/lesson.md: unknown directive {name!r}")


def _bug_cell(unit: Unit, name: str, solved: bool) -> str:
    """A lab's cell that looks for one of the starter's bugs with its tool: in the student's
    notebook on their own code, in the instructor's on the solution with that bug planted."""
    bug = mutants.load_planted(unit).get(name)
    if bug is None or name not in unit.planted_regions():
        raise ValueError(f"{unit.name}/lesson.md: bug {name!r} is not a BUG region listed in planted_bugs.toml")
    files = ", ".join(repr(f) for f in unit.files)
    arguments = [repr(unit.name), f"[{files}]", repr(bug.found_by)]
    if bug.found_by == TESTS:
        public = [case.name for case in unit.tests(hidden=False).CASES]
        lost = bug.expected_losses(public)
        arguments.append(f"cases={[case for case in public if case in lost]!r}")
    lines = ["from course.lab import find_bug", ""]
    if solved:
        edit = bug.edits[0]
        lines.append("# The starter's bug, planted again in the solved sources: what the tool shows of it")
        lines.append(
            f"BUG = dict(file={edit['file']!r},\n           old={edit['old']!r},\n           new={edit['new']!r})"
        )
        arguments.append("plant=BUG")
    lines.append(f"found = find_bug({', '.join(arguments)})")
    return "\n".join(lines)


def thresholds_text(unit: Unit) -> str:
    """How the public perf cases score, read from the cases themselves: a lesson that wrote
    the numbers out by hand could disagree with what is graded."""
    perf = [case for case in unit.tests(hidden=False).CASES if case.kind == "perf"]
    if not perf:
        raise ValueError(f"{unit.name}/lesson.md: <!-- thresholds --> in a unit without public perf cases")
    rows = [
        "| test | shape, dtype | full points at | no points at | here, full points at about |",
        "| --- | --- | --- | --- | --- |",
    ]
    for case in perf:
        shape = "×".join(str(n) for n in case.params.get("shape", ()))
        dtype = str(case.params.get("dtype", "")).replace("torch.", "")
        full, zero = case.params["full_at"], case.params["zero_at"]
        stand_in = case.params.get("reference_vs_torch", 1.0)
        rows.append(f"| `{case.name}` | {shape} {dtype} | {full:g}× | {zero:g}× | {full * stand_in:.2f}× PyTorch |")
    return (
        "**How the performance tests score.** The grader times the course's reference solution "
        "beside yours, in the same run on the same GPU: the ratio is its time over yours, and points "
        "rise linearly between the two columns. The reference is not in this notebook, so here "
        "PyTorch's op is timed instead, and its speed scaled by how fast the reference ran against it "
        "on the GPU it was measured on: the last column, and the points shown here, are an estimate.\n\n"
        + "\n".join(rows)
    )


def _plan_arguments(unit: Unit) -> str:
    """build_unit's arguments for the unit: its name and files, and its kinds where not the defaults."""
    plan = unit.plan()
    arguments = [repr(plan.name), "[" + ", ".join(repr(f) for f in plan.files) + "]"]
    defaults = {"build": "jit", "load": "pybind", "namespace": "", "package": ""}
    arguments += [f"{key}={getattr(plan, key)!r}" for key, default in defaults.items() if getattr(plan, key) != default]
    return ", ".join(arguments)


def lesson_cells(unit: Unit, solved: bool, release: str = runtime_package.DEFAULT_RELEASE) -> list:
    """Cells from the unit's lesson.md: prose becomes markdown, ```python blocks and
    <!-- directive --> lines become the cells they name; the runtime cell installs from `release`."""
    cells, prose = [], []

    def flush_prose():
        text = "\n".join(prose).strip()
        if text:
            cells.append(("markdown", text, {}))
        prose.clear()

    for part in lesson_parts(unit):
        if part.kind == "prose":
            prose.append(part.text)
            continue
        flush_prose()
        if part.kind == "code":
            cells.append(("code", part.text, {}))
        else:
            cells.append(_directive_cell(unit, part.name, part.text, solved=solved, release=release))
    flush_prose()
    written = {text.split("\n", 1)[0] for _, text, _ in cells}
    missing = [f for f in unit.files if f"{SOURCE_MAGIC} {unit.name}/{f}" not in written]
    if missing:  # the notebook would build without them
        raise ValueError(f"{unit.name}/lesson.md: no <!-- source FILE --> line for {', '.join(missing)}")

    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {
        "accelerator": "GPU",
        "colab": {"gpuType": "T4", "provenance": [], "toc_visible": True},
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "course": {"unit": unit.name, "version": "instructor" if solved else "student"},
    }
    for index, (kind, text, metadata) in enumerate(cells):
        maker = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
        cell = maker(text, metadata=metadata)
        cell["id"] = f"{unit.day}-{index:03d}"  # stable ids: regenerating changes nothing
        notebook.cells.append(cell)
    return notebook


def notebook_paths(unit: Unit) -> dict[str, bool]:
    notebooks = os.path.join(unit.repo, "notebooks")
    return {
        os.path.join(notebooks, f"{unit.name}.ipynb"): False,
        os.path.join(notebooks, "instructor", f"{unit.name}.ipynb"): True,
    }


def generated_files(unit: Unit) -> dict[str, str]:
    """Every generated path of the unit and the text it must hold."""
    files = {os.path.join(unit.repo, "src_templates", unit.name, f): unit.template(f) for f in unit.files}
    for path, solved in notebook_paths(unit).items():
        files[path] = nbformat.writes(lesson_cells(unit, solved)) + "\n"
    mistakes = mistakes_text(unit)
    if mistakes:
        files[mistakes_path(unit)] = mistakes
    if has_lesson(unit):
        files[pacing_path(unit)] = pacing_text(unit)
    _check_stubs(unit)
    return files


def _check_stubs(unit: Unit) -> None:
    """Every piece left to students must say what to write."""
    tag = f"TODO({unit.day})"
    for file in unit.sources:
        for number, stub in enumerate(stubs(unit.raw(file), file), 1):
            if tag not in stub and not re.search(rf'COURSE_TODO(_CPU|_CUDA)?\("{unit.day}:', stub):
                raise ValueError(f"{unit.name}/{file}: solution region {number} has no {tag} stub")


def without_outputs(text: str) -> str | None:
    """A notebook's text with its code cells' outputs and execution counts emptied (None if
    it is not a notebook)."""
    try:
        notebook = nbformat.reads(text, as_version=4)
    except (ValueError, KeyError, json.JSONDecodeError, nbformat.reader.NotJSONError):
        return None
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nbformat.writes(notebook) + "\n"


def is_current(path: str, current: str | None, text: str, unit: Unit) -> bool:
    """The file holds `text`; an instructor notebook may hold it with the outputs of a run."""
    if current == text:
        return True
    executed_ok = [p for p, solved in notebook_paths(unit).items() if solved]
    return current is not None and path in executed_ok and without_outputs(current) == text


def _targets(repo: str, names: list[str]) -> list[tuple[str, str, Unit | None]]:
    """(path, the text it must hold, its unit) of every generated file: the runtime's version,
    then each unit's files (the units `names`, or all)."""
    targets = [(runtime_package.VERSION_FILE, runtime_package.version_file_text(), None)]
    for unit in units.all_units(repo):
        if not names or unit.name in names:
            targets += [(path, text, unit) for path, text in generated_files(unit).items()]
    return targets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report stale generated files")
    parser.add_argument("--repo", default=units.REPO, help="the course folder (default: this one)")
    parser.add_argument("units", nargs="*", help="unit names (default: every unit)")
    args = parser.parse_args(argv)
    stale = []
    for path, text, unit in _targets(args.repo, args.units):
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if current == text or (unit is not None and is_current(path, current, text, unit)):
            continue
        relative = os.path.relpath(path, args.repo)
        if args.check:
            stale.append(relative)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
            print("wrote", relative)
    for relative in stale:
        print(f"stale: {relative} (run: python -m course.authoring.generate)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
