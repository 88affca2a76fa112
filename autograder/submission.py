"""Turn what a student handed in (notebook, folder or zip) into the unit's source files."""

from __future__ import annotations

import os
import shutil
import stat
import zipfile
import zlib

import nbformat

from autograder.untrusted_files import open_regular
from course.notebook import SOURCE_MAGIC
from course.spec.units import Unit

_WRITE_MAGICS = (SOURCE_MAGIC, "%%writefile")
MAX_SOURCE_BYTES = 1 << 20  # a source file larger than this is not a source file
MAX_NOTEBOOK_BYTES = 50 << 20  # a notebook with its outputs (plots, logs)
MAX_ZIP_MEMBERS = 1000
MAX_FOLDER_ENTRIES = 10_000  # files and folders in a folder submission, at every depth
MAX_FOLDER_DEPTH = 16  # a package's deepest source is a few folders down


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
    except Exception as error:
        raise SubmissionError(
            f"the notebook is not a valid notebook ({type(error).__name__}: "
            f"{str(error).splitlines()[0][:200] if str(error) else ''})"
        ) from None
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
    """The unit's files and the answers in a zip. Two members that are one unit file (old/x.cu
    and new/x.cu) are refused: which the student meant is theirs to say, not the order's."""
    files, answers, member_of = {}, {}, {}
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_ZIP_MEMBERS:
                raise SubmissionError(f"the zip holds {len(members)} files; at most {MAX_ZIP_MEMBERS} are read")
            budget = MAX_NOTEBOOK_BYTES  # of notebooks read, in all
            for info in members:
                name = unit_file(info.filename, unit)
                if name and name in member_of:
                    raise SubmissionError(
                        f"the zip holds two copies of {name}: {member_of[name]!r} and {info.filename!r}; hand in one"
                    )
                if name and info.file_size <= MAX_SOURCE_BYTES:
                    member_of[name] = info.filename
                    files[name] = archive.read(info).decode("utf-8", errors="replace")
                elif info.filename.lower().endswith(".ipynb") and info.file_size <= budget:
                    budget -= info.file_size
                    _, answers = _cells_to_files(archive.read(info), unit)
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        NotImplementedError,
        RuntimeError,
        OSError,
        EOFError,
        zlib.error,
    ) as error:
        raise SubmissionError(f"the zip could not be read ({type(error).__name__}: {str(error)[:200]})") from None
    return files, answers


def _read_source(path: str) -> str | None:
    """A source file's text; None for what is not a regular file (a link could name any file the
    grader can read, a named pipe would keep it waiting) or is too large to be a source."""
    try:
        with open_regular(path) as handle:
            data = handle.read(MAX_SOURCE_BYTES + 1)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace") if len(data) <= MAX_SOURCE_BYTES else None


def _read_folder(path: str, unit: Unit) -> dict[str, str]:
    """The unit's files in a folder, walked without recursion or links, within bounds: a folder
    tree made to exhaust the grader is a SubmissionError."""
    files, pending, seen = {}, [(path, 0)], 0
    while pending:
        folder, depth = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as error:
            raise SubmissionError(f"the folder could not be read ({type(error).__name__})") from None
        seen += len(entries)
        if seen > MAX_FOLDER_ENTRIES:
            raise SubmissionError(f"the folder holds over {MAX_FOLDER_ENTRIES} files and folders")
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if depth == MAX_FOLDER_DEPTH:
                    raise SubmissionError(f"the folder nests folders over {MAX_FOLDER_DEPTH} deep")
                pending.append((entry.path, depth + 1))
                continue
            name = unit_file(os.path.relpath(entry.path, path), unit)
            text = _read_source(entry.path) if name else None
            if text is not None:
                files[name] = text
    return files


def read_submission(path: str, unit: Unit) -> tuple[dict[str, str], dict[str, str]]:
    """({file name: text} for the unit's files found, {answer id: text}); SubmissionError
    when it cannot be read."""
    if os.path.isdir(path):
        return _read_folder(path, unit), {}
    if not stat.S_ISREG(os.stat(path).st_mode):  # a named pipe would keep the grader waiting
        raise SubmissionError(f"{os.path.basename(path)}: not a regular file")
    if zipfile.is_zipfile(path):
        return _read_zip(path, unit)
    if path.lower().endswith(".ipynb"):
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
