"""A class's roster (`grade-all --roster FILE`, `merge --roster FILE`): who should have handed in.

A UTF-8 CSV file whose header names one or more of these columns (any letter case, any order;
other columns are ignored):

    id     the name of the student's hand-in without its suffix (alice for alice.zip), or their
           submission's id in OUT/results/
    name   the student's name, as the hand-in or the Gradescope export gives it
    email  the student's email (what Gradescope's score upload matches rows by)
    sid    the student's id number

A row is a student. A submission is theirs when any of the row's non-empty fields equals the
submission's (letter case and surrounding spaces aside). A student with no submission is listed
as missing. The gradebook names a student as the roster does, and takes the roster's email and
sid where the hand-in has none (a folder of hand-ins has only names: the roster gives Gradescope's
upload its emails).
"""

from __future__ import annotations

import csv

COLUMNS = ("id", "name", "email", "sid")


def read_roster(path: str) -> list[dict[str, str]]:
    """The roster's rows, each {column: text} over COLUMNS; ValueError naming the file when it
    cannot be read or names none of the columns."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:  # -sig: a spreadsheet's BOM
            reader = csv.DictReader(handle)
            header = {(column or "").strip().lower(): column for column in reader.fieldnames or ()}
            known = [column for column in COLUMNS if column in header]
            if not known:
                raise ValueError(
                    f"--roster {path!r}: expected a CSV file whose first row names one or more "
                    f"of the columns {', '.join(COLUMNS)}"
                )
            rows = [{column: (row.get(header[column]) or "").strip() for column in known} for row in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ValueError(
            f"--roster {path!r}: expected a readable UTF-8 CSV file ({type(error).__name__}: {error})"
        ) from None
    return [row for row in rows if any(row.values())]


def _key(text: str) -> str:
    return text.strip().casefold()


def is_theirs(row: dict[str, str], submission_id: str, student: dict) -> bool:
    """Whether `student` of submission `submission_id` is the roster's `row`."""
    pairs = [
        ("id", submission_id),
        ("id", student.get("name", "")),
        ("name", student.get("name", "")),
        ("email", student.get("email", "")),
        ("sid", student.get("sid", "")),
    ]
    return any(row.get(column) and _key(row[column]) == _key(value) for column, value in pairs if value)


def filled_in(row: dict[str, str], student: dict) -> dict:
    """`student` with what the roster's row adds: its name (a hand-in's is often its file's), and
    an email and sid where the hand-in has none (Gradescope's own are what its upload matches)."""
    added = {key: row[key] for key in ("email", "sid") if row.get(key) and not student.get(key)}
    return {**student, **added, **({"name": row["name"]} if row.get("name") else {})}
