"""A unit's late policy (`grade-all`/`merge --late-policy FILE`), a small TOML file:

    deadline = 2031-03-01T23:59:00-05:00   # with its time zone
    grace_minutes = 10                     # a hand-in this soon after the deadline is on time
    penalty_per_day = 0.1                  # a share of the score off per day late, started days
    # or, instead of a penalty: a budget of late days per student, spent a day at a time;
    # a hand-in later than the days a student has left earns nothing
    late_days = 3
    [late_days_left]                       # where a student has fewer left (by email or SID)
    "ada@example.edu" = 1

A day late is any started 24 hours past the deadline and its grace. When a hand-in was made
comes from the Gradescope export's created_at, else its file's time (autograder/collect.py).
`--due WHEN` is the policy with a deadline alone: late hand-ins are marked, nothing is taken off.
"""

from __future__ import annotations

import datetime
import math
import tomllib
from dataclasses import dataclass, field

DAY = 86400.0
KEYS = ("deadline", "grace_minutes", "penalty_per_day", "late_days", "late_days_left")


@dataclass(frozen=True)
class LatePolicy:
    deadline: float  # seconds since the epoch
    grace_minutes: float = 0.0
    penalty_per_day: float | None = None  # a share of the score, 0 to 1
    late_days: int | None = None  # each student's budget
    late_days_left: dict[str, int] = field(default_factory=dict)  # email or SID (case-folded): days left

    @property
    def has_penalty(self) -> bool:
        return self.penalty_per_day is not None or self.late_days is not None


@dataclass(frozen=True)
class Lateness:
    days_late: int = 0
    penalty: float = 0.0  # the share of the score taken off
    late_days_used: int = 0


def days_late(policy: LatePolicy, handed_in: float | None) -> int:
    """Started days past the deadline and its grace; 0 when on time or when nothing says when."""
    if handed_in is None:
        return 0
    past = handed_in - policy.deadline - policy.grace_minutes * 60
    return math.ceil(past / DAY) if past > 0 else 0


def lateness(policy: LatePolicy, handed_in: float | None, student: dict) -> Lateness:
    """What the policy does to `student`'s hand-in at `handed_in` (seconds since the epoch)."""
    days = days_late(policy, handed_in)
    if not days:
        return Lateness()
    if policy.penalty_per_day is not None:
        return Lateness(days, min(1.0, days * policy.penalty_per_day))
    if policy.late_days is not None:
        left = _days_left(policy, student)
        return Lateness(days, 0.0, days) if days <= left else Lateness(days, 1.0, left)
    return Lateness(days)


def _days_left(policy: LatePolicy, student: dict) -> int:
    for key in ("email", "sid"):
        value = (student.get(key) or "").strip().casefold()
        if value and value in policy.late_days_left:
            return policy.late_days_left[value]
    return policy.late_days or 0


def from_due(text: str) -> LatePolicy:
    """`--due WHEN`'s policy: a deadline alone (no time zone given: this machine's)."""
    return LatePolicy(datetime.datetime.fromisoformat(text).timestamp())


def read_policy(path: str) -> LatePolicy:
    """The policy in the TOML file at `path`; ValueError naming the file and the key when a value
    is missing or not what it must be."""
    where = f"--late-policy {path!r}"
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{where}: expected a readable TOML file ({type(error).__name__}: {error})") from None
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; expected some of {', '.join(KEYS)}")
    if "penalty_per_day" in data and "late_days" in data:
        raise ValueError(f"{where}: expected penalty_per_day or late_days, not both")
    if "late_days_left" in data and "late_days" not in data:
        raise ValueError(f"{where}: late_days_left without late_days; expected the budget, such as late_days = 3")
    return LatePolicy(
        _deadline(data.get("deadline"), where),
        _number(data, "grace_minutes", where, 0.0, math.inf) or 0.0,
        _number(data, "penalty_per_day", where, 0.0, 1.0),
        _whole(data.get("late_days"), f"{where}: late_days"),
        _left(data.get("late_days_left", {}), where),
    )


def _deadline(value, where: str) -> float:
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value)
        except ValueError:
            pass
    if not (isinstance(value, datetime.datetime) and value.tzinfo is not None):
        raise ValueError(
            f"{where}: deadline is {value!r}; expected a date and time with its time zone, "
            f"such as deadline = 2031-03-01T23:59:00-05:00"
        )
    return value.timestamp()


def _number(data: dict, key: str, where: str, least: float, most: float) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not least <= value <= most:
        shown = f"from {least:g} to {most:g}" if math.isfinite(most) else f"{least:g} or more"
        raise ValueError(f"{where}: {key} is {value!r}; expected a number {shown}")
    return float(value)


def _whole(value, where: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"{where} is {value!r}; expected a whole number of days, 0 or more")
    return value


def _left(table, where: str) -> dict[str, int]:
    if not isinstance(table, dict):
        raise ValueError(f"{where}: late_days_left is not a table of students' emails or SIDs to days")
    return {str(k).strip().casefold(): _whole(v, f"{where}: late_days_left.{k}") for k, v in table.items()}
