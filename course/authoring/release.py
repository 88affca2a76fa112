"""The student bundle: what a class gets, and nothing the grader keeps to itself.

    python -m course.authoring.release OUT --unit UNIT [--unit ...] [--repository OWNER/NAME] [--branch B]
    python -m course.authoring.release OUT --all ...

writes
    OUT/README.md                       how to start, with a Colab badge per unit
    OUT/notebooks/<unit>.ipynb          the student notebooks
    OUT/src_templates/<unit>/...        the starter sources
    OUT/public_tests/<unit>/public_tests.py, OUT/public_tests/common/*.py
    OUT.zip                             the same folder, zipped

Everything is rendered from solutions/ by the generator's own functions (templates with
stubs in place of solutions, student notebooks), never copied from the repository, so a
stale generated file cannot leak into a release. Files an earlier unit hands over solved
(`[given]` in unit.toml) are in a later unit's templates by design: release a unit only
once the units it takes files from are past their deadline.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import zipfile

import nbformat

from course.authoring import generate
from course.spec import units
from course.spec.units import Unit
from course.written_whole import written_whole

DEFAULT_REPOSITORY = "cuda-extensions-course/cuda-extensions-course"
_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # fixed, so the same release zips to the same bytes
MARKER = ".course-release"  # in every bundle folder: only a folder holding it is replaced


def colab_url(repository: str, branch: str, unit: Unit) -> str:
    return f"https://colab.research.google.com/github/{repository}/blob/{branch}/notebooks/{unit.name}.ipynb"


def bundle_files(selected: list[Unit], repository: str, branch: str) -> dict[str, str]:
    """{path inside the bundle: text} for the units `selected`."""
    files = {}
    for unit in selected:
        notebook = generate.lesson_cells(unit, solved=False)
        files[f"notebooks/{unit.name}.ipynb"] = nbformat.writes(notebook) + "\n"
        for name in unit.files:
            files[f"src_templates/{unit.name}/{name}"] = unit.template(name)
        for path, text in unit.public_test_files().items():
            files[f"public_tests/{path}"] = text
    files["README.md"] = student_readme(selected, repository, branch)
    return files


def student_readme(selected: list[Unit], repository: str, branch: str) -> str:
    badge = "https://colab.research.google.com/assets/colab-badge.svg"
    rows = "\n".join(f"| {unit.title} | [![Open In Colab]({badge})]({colab_url(repository, branch, unit)}) "
                     f"| `src_templates/{unit.name}/` |" for unit in selected)
    return f"""# PyTorch C++/CUDA extensions: student materials

One notebook a unit. Open it in Colab (Runtime → Change runtime type → T4 GPU), run every
cell from the top, and fill the parts marked `TODO(dayNN)` in the source cells: the tests
name each piece still to write. The last cell zips your sources and the notebook: hand in
that zip (or the notebook).

| unit | notebook | starter sources |
| --- | --- | --- |
{rows}

## What is here

| path | what it holds |
| --- | --- |
| `notebooks/` | the notebooks; each writes its own sources, the course runtime and its public tests |
| `src_templates/<unit>/` | the starter sources, to work outside a notebook |
| `public_tests/` | the tests the notebook runs; the grade also counts tests you do not see |

## Grading

Your hand-in is built and tested on the grader's machines: a build error, a crash or a
hang fails only the tests it touches. Tests you see here are part of the grade; more
cases (other shapes, dtypes and edge cases of the same op) are graded after the deadline.
"""


def write(selected: list[Unit], out: str, repository: str = DEFAULT_REPOSITORY, branch: str = "main") -> str:
    """Write the bundle into the folder `out` (replaced) and `out`.zip; return the zip's path."""
    if not _REPOSITORY.match(repository):
        raise ValueError(f"repository {repository!r}: expected OWNER/NAME, as in github.com/OWNER/NAME")
    if not selected:
        raise ValueError("units: expected at least one unit to release")
    files = {**bundle_files(selected, repository, branch), MARKER: ""}
    out = os.path.abspath(out)
    _check_replaceable(out)
    shutil.rmtree(out, ignore_errors=True)
    for path, text in files.items():
        full = os.path.join(out, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(text)
    archive = out + ".zip"
    top = os.path.basename(out)
    with written_whole(archive) as temporary, zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(files):
            bundle.writestr(zipfile.ZipInfo(f"{top}/{path}", _ZIP_TIME), files[path])
    return archive


def _check_replaceable(out: str) -> None:
    """`out` is replaced whole: it must be new, empty, or an earlier bundle (it holds MARKER),
    never a folder of other work (the repository, the current folder, a parent of either)."""
    here = {os.path.realpath(p) for p in (os.getcwd(), units.REPO)}
    if any(p == os.path.realpath(out) or p.startswith(os.path.realpath(out).rstrip("/") + "/") for p in here):
        raise ValueError(f"OUT {out!r}: expected a folder of its own for the bundle, not the current folder, "
                         f"the course's repository or a folder above them")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"OUT {out!r}: expected a folder, and this is a file")
    if os.path.isdir(out) and os.listdir(out) and not os.path.exists(os.path.join(out, MARKER)):
        raise ValueError(f"OUT {out!r}: expected a new or empty folder, or an earlier bundle; this one holds "
                         f"other files (no {MARKER} in it), which replacing it would delete")


def selected_units(names: list[str] | None, everything: bool = False) -> list[Unit]:
    """The units named, or with `everything` all of them. Never all by default: a later unit's
    templates hold the files earlier units hand over solved ([given])."""
    known = {unit.name: unit for unit in units.all_units()}
    unknown = [name for name in names or () if name not in known]
    if unknown:
        raise ValueError(f"--unit {', '.join(unknown)}: expected one of {', '.join(known)}")
    if bool(names) == everything:
        raise ValueError("--unit: name the units to release (repeatable), or pass --all for every unit; a "
                         "later unit's starter code holds solved files of the units before it")
    return [known[name] for name in names] if names else list(known.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course.authoring.release", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="folder to write (replaced); OUT.zip is written beside it")
    parser.add_argument("--unit", action="append", help="unit to release (repeatable)")
    parser.add_argument("--all", action="store_true", help="release every unit (their templates hold the "
                        "solved files each hands the next: do it once every unit is past its deadline)")
    parser.add_argument("--repository", default=DEFAULT_REPOSITORY,
                        help="OWNER/NAME on GitHub that the Colab badges open the notebooks from")
    parser.add_argument("--branch", default="main", help="branch the Colab badges open")
    args = parser.parse_args(argv)
    try:
        archive = write(selected_units(args.unit, args.all), args.out, args.repository, args.branch)
    except ValueError as error:
        parser.error(str(error))
    print(f"wrote {args.out}/ and {archive}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
