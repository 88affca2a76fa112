"""The student bundle: what a class gets, and nothing the grader keeps to itself.

    python -m course.authoring.release OUT --unit UNIT [--unit ...] [--repository OWNER/NAME] [--branch B]
    python -m course.authoring.release OUT --all ...

writes
    OUT/README.md                       how to start, with a Colab badge per unit
    OUT/notebooks/<unit>.ipynb          the student notebooks
    OUT/src_templates/<unit>/...        the starter sources
    OUT/public_tests/<unit>/public_tests.py, OUT/public_tests/common/*.py
    OUT/runtime/course_runtime-VERSION-py3-none-any.whl
                                        the course runtime the notebooks install (every version
                                        released stays: a notebook pins the one it was made with)
    OUT/.course-release                 what the releases wrote there: their units and files
    OUT.zip                             the bundle's files, zipped

Everything is rendered from solutions/ by the generator's own functions (templates with
stubs in place of solutions, student notebooks), never copied from the repository, so a
stale generated file cannot leak into a release. Files an earlier unit hands over solved
(`[given]` in unit.toml) are in a later unit's templates by design: release a unit only
once the units it takes files from are past their deadline.

OUT may be a git checkout of the student repository: a release updates it in place. It
writes only files whose text changed, removes only files an earlier release wrote that this
one does not, and keeps every other file (`.git` included) and every unit released before.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import zipfile

import nbformat

from course.authoring import generate, runtime_package
from course.authoring.runtime_package import DEFAULT_REPOSITORY
from course.spec import units
from course.spec.units import Unit
from course.written_whole import written_whole

_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # fixed, so the same release zips to the same bytes
MARKER = ".course-release"  # in every bundle folder: the units and files its releases wrote
RUNTIME_DIR = "runtime"


def colab_url(repository: str, branch: str, unit: Unit) -> str:
    return f"https://colab.research.google.com/github/{repository}/blob/{branch}/notebooks/{unit.name}.ipynb"


def bundle_files(selected: list[Unit], repository: str, branch: str) -> dict[str, str | bytes]:
    """{path inside the bundle: text, or bytes for the runtime's wheel} for the units `selected`."""
    files, suites = {}, {}
    release = runtime_package.release_url(repository, branch)
    for unit in selected:
        notebook = generate.lesson_cells(unit, solved=False, release=release)
        files[f"notebooks/{unit.name}.ipynb"] = nbformat.writes(notebook) + "\n"
        for name in unit.files:
            files[f"src_templates/{unit.name}/{name}"] = unit.template(name)
        suites.update(unit.public_test_files())
    files.update({f"public_tests/{path}": text for path, text in suites.items()})
    wheel = runtime_package.wheel_name(runtime_package.runtime_version())
    files[f"{RUNTIME_DIR}/{wheel}"] = runtime_package.wheel_bytes(suites)
    files["README.md"] = student_readme(selected, repository, branch)
    return files


def student_readme(selected: list[Unit], repository: str, branch: str) -> str:
    badge = "https://colab.research.google.com/assets/colab-badge.svg"
    rows = "\n".join(
        f"| {unit.title} | [![Open In Colab]({badge})]({colab_url(repository, branch, unit)}) "
        f"| `src_templates/{unit.name}/` |"
        for unit in selected
    )
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
| `notebooks/` | the notebooks; each writes its own sources and installs the course runtime |
| `src_templates/<unit>/` | the starter sources, to work outside a notebook |
| `public_tests/` | the tests the notebook runs; the grade also counts tests you do not see |
| `runtime/` | the course runtime (build, test and submit helpers, with the public tests), one wheel a version |

Without a network, install the runtime from a copy of this folder before opening a notebook
(`pip install runtime/course_runtime-*.whl`, the version the notebook names in its first cell),
or set `COURSE_RELEASE` to the `runtime/` folder's path.

## Grading

Your hand-in is built and tested on the grader's machines: a build error, a crash or a
hang fails only the tests it touches. Tests you see here are part of the grade; more
cases (other shapes, dtypes and edge cases of the same op) are graded after the deadline.
"""


def write(selected: list[Unit], out: str, repository: str = DEFAULT_REPOSITORY, branch: str = "main") -> str:
    """Release the units `selected`, with those released into `out` before, into the folder
    `out` (updated in place) and `out`.zip; return the zip's path."""
    if not _REPOSITORY.match(repository):
        raise ValueError(f"repository {repository!r}: expected OWNER/NAME, as in github.com/OWNER/NAME")
    if not selected:
        raise ValueError("units: expected at least one unit to release")
    out = os.path.abspath(out)
    _check_replaceable(out)
    earlier = _manifest(out)
    names = {unit.name for unit in selected} | set(earlier["units"])
    released = [unit for unit in units.all_units() if unit.name in names]
    files = bundle_files(released, repository, branch)
    for path in earlier["files"]:
        if path not in files and not path.startswith(f"{RUNTIME_DIR}/"):  # a notebook pins its runtime
            _remove(out, path)
    for path, content in files.items():
        _write_if_changed(os.path.join(out, path), content)
    kept = sorted({*files, *(path for path in earlier["files"] if path.startswith(f"{RUNTIME_DIR}/"))})
    manifest = json.dumps({"units": [unit.name for unit in released], "files": kept}, indent=1) + "\n"
    _write_if_changed(os.path.join(out, MARKER), manifest)
    archive = out + ".zip"
    top = os.path.basename(out)
    with written_whole(archive) as temporary, zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(files):
            bundle.writestr(zipfile.ZipInfo(f"{top}/{path}", _ZIP_TIME), files[path])
        bundle.writestr(zipfile.ZipInfo(f"{top}/{MARKER}", _ZIP_TIME), manifest)
    return archive


def _manifest(out: str) -> dict:
    """What earlier releases wrote into `out`: {"units": [...], "files": [...]}."""
    try:
        with open(os.path.join(out, MARKER), encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return {"units": [], "files": []}
    if not isinstance(manifest, dict):
        return {"units": [], "files": []}
    return {key: [str(item) for item in manifest.get(key, []) if isinstance(item, str)] for key in ("units", "files")}


def _write_if_changed(path: str, content: str | bytes) -> None:
    data = content.encode() if isinstance(content, str) else content
    if os.path.isfile(path):
        with open(path, "rb") as handle:
            if handle.read() == data:
                return  # untouched: git and the file's time stamp see no change
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with written_whole(path) as temporary, open(temporary, "wb") as handle:
        handle.write(data)


def _remove(out: str, path: str) -> None:
    """Remove `path`, a file an earlier release wrote into `out`, and the folders it leaves empty."""
    full = os.path.normpath(os.path.join(out, path))
    if not full.startswith(out + os.sep) or not os.path.isfile(full):
        return  # a manifest naming a path outside the bundle is not ours to follow
    os.remove(full)
    folder = os.path.dirname(full)
    while folder != out and not os.listdir(folder):
        os.rmdir(folder)
        folder = os.path.dirname(folder)


def _check_replaceable(out: str) -> None:
    """`out` must be new, empty, an earlier bundle (it holds MARKER) or a git checkout, and never
    the current folder, the course's repository or a folder above them."""
    here = {os.path.realpath(p) for p in (os.getcwd(), units.REPO)}
    if any(p == os.path.realpath(out) or p.startswith(os.path.realpath(out).rstrip("/") + "/") for p in here):
        raise ValueError(
            f"OUT {out!r}: expected a folder of its own for the bundle, not the current folder, "
            f"the course's repository or a folder above them"
        )
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"OUT {out!r}: expected a folder, and this is a file")
    known = (os.path.join(out, MARKER), os.path.join(out, ".git"))
    if os.path.isdir(out) and os.listdir(out) and not any(os.path.exists(path) for path in known):
        raise ValueError(
            f"OUT {out!r}: expected a new or empty folder, an earlier bundle or a git checkout of the "
            f"student repository; this one holds other files (no {MARKER}, no .git)"
        )


def selected_units(names: list[str] | None, everything: bool = False) -> list[Unit]:
    """The units named, or with `everything` all of them. Never all by default: a later unit's
    templates hold the files earlier units hand over solved ([given])."""
    known = {unit.name: unit for unit in units.all_units()}
    unknown = [name for name in names or () if name not in known]
    if unknown:
        raise ValueError(f"--unit {', '.join(unknown)}: expected one of {', '.join(known)}")
    if bool(names) == everything:
        raise ValueError(
            "--unit: name the units to release (repeatable), or pass --all for every unit; a "
            "later unit's starter code holds solved files of the units before it"
        )
    return [known[name] for name in names] if names else list(known.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course.authoring.release",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "out",
        help="the bundle's folder: new, an earlier bundle or a git checkout of the student "
        "repository (updated in place); OUT.zip is written beside it",
    )
    parser.add_argument("--unit", action="append", help="unit to release (repeatable); earlier units stay")
    parser.add_argument(
        "--all",
        action="store_true",
        help="release every unit (their templates hold the "
        "solved files each hands the next: do it once every unit is past its deadline)",
    )
    parser.add_argument(
        "--repository",
        default=DEFAULT_REPOSITORY,
        help="OWNER/NAME on GitHub that the Colab badges open and the notebooks install from",
    )
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
