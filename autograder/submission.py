"""Turn what a student handed in (notebook, folder or zip) into the unit's source files."""
from __future__ import annotations

import os
import shutil
import zipfile
import zlib

import nbformat

from course.notebook import SOURCE_MAGIC
from course.authoring.units import Unit

_WRITE_MAGICS = (SOURCE_MAGIC, "%%writefile")
MAX_SOURCE_BYTES = 1 << 20  # a source file larger than this is not a source file
MAX_NOTEBOOK_BYTES = 50 << 20  # a notebook with its outputs (plots, logs)
MAX_ZIP_MEMBERS = 1000


class SubmissionError(ValueError):
    pass


def unit_file(path: str, unit: Unit) -> str | None:
    """The unit file that `path` (in a zip, a folder or a notebook cell) is, if any: the
    longest of the unit's files that ends the path. A package's files keep their folders."""
    parts = path.replace("\\", "/").strip("/").split("/")
    for start in range(len(parts)):
        candidate = "/".join(parts[start:])
        if candidate in unit.files:
            return candidate
    return None


def _cells_to_files(text: str | bytes, unit: Unit) -> tuple[dict[str, str], dict[str, str]]:
    """Sources written by the notebook's cells (last write wins) and its answer cells."""
    try:
        notebook = nbformat.reads(text, as_version=4)
        nbformat.validate(notebook)
    except Exception as error:  # noqa: BLE001 - nbformat raises many kinds on a broken notebook
        raise SubmissionError(f"the notebook is not a valid notebook ({type(error).__name__}: "
                              f"{str(error).splitlines()[0][:200] if str(error) else ''})") from None
    files, answers = {}, {}
    for cell in notebook.cells:
        source = cell.source
        course = cell.metadata.get("course")
        answer = course.get("answer") if isinstance(course, dict) else None
        if isinstance(answer, str) and answer:
            answers[answer] = source.strip()
        if cell.cell_type != "code":
            continue
        first, _, body = source.partition("\n")
        parts = first.split()
        if len(parts) == 2 and parts[0] in _WRITE_MAGICS:
            name = unit_file(parts[1], unit)
            if name:
                files[name] = body
    return files, answers


def _read_zip(path: str, unit: Unit) -> tuple[dict[str, str], dict[str, str]]:
    files, answers = {}, {}
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_ZIP_MEMBERS:
                raise SubmissionError(f"the zip holds {len(members)} files; at most {MAX_ZIP_MEMBERS} are read")
            budget = MAX_NOTEBOOK_BYTES  # of notebooks read, in all
            for info in members:
                name = unit_file(info.filename, unit)
                if name and info.file_size <= MAX_SOURCE_BYTES:
                    files[name] = archive.read(info).decode("utf-8", errors="replace")
                elif info.filename.endswith(".ipynb") and info.file_size <= budget:
                    budget -= info.file_size
                    _, answers = _cells_to_files(archive.read(info), unit)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, OSError, EOFError,
            zlib.error) as error:
        raise SubmissionError(f"the zip could not be read ({type(error).__name__}: {str(error)[:200]})") from None
    return files, answers


def read_submission(path: str, unit: Unit) -> tuple[dict[str, str], dict[str, str]]:
    """({file name: text} for the unit's files found, {answer id: text}); SubmissionError
    when it cannot be read."""
    if os.path.isdir(path):
        files = {}
        for root, _, names in os.walk(path):
            for entry in names:
                full = os.path.join(root, entry)
                name = unit_file(os.path.relpath(full, path), unit)
                # a link could name any file the grader can read
                if name and not os.path.islink(full) and os.path.getsize(full) <= MAX_SOURCE_BYTES:
                    with open(full, encoding="utf-8", errors="replace") as handle:
                        files[name] = handle.read()
        return files, {}
    if zipfile.is_zipfile(path):
        return _read_zip(path, unit)
    if path.endswith(".ipynb"):
        if os.path.getsize(path) > MAX_NOTEBOOK_BYTES:
            raise SubmissionError(f"the notebook is over {MAX_NOTEBOOK_BYTES >> 20} MB")
        with open(path, "rb") as handle:
            return _cells_to_files(handle.read(), unit)
    raise SubmissionError(f"{os.path.basename(path)}: expected a notebook (.ipynb), a folder or a zip")


def materialize(path: str, unit: Unit, dest: str) -> tuple[list[str], dict[str, str]]:
    """Write the submission's sources into dest (shared course headers from the course when
    missing). Returns (files missing from the submission, answers)."""
    files, answers = read_submission(path, unit)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    missing = []
    for name in unit.files:
        if name not in files:
            if name in unit.common or name in unit.given_files:
                files[name] = unit.solution(name)
            else:
                missing.append(name)
                continue
        path = os.path.join(dest, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(files[name])
    return missing, answers
