"""A class's reports, read back from a batch's folder (OUT/results/<id>/): the gradebook
for Gradescope's score upload, the perf leaderboard, what the class failed most, which tests
the grading's time went to, and the written answers to grade by hand (answers.csv).

Everything here is rebuilt from the files each grading left, so the shards of a Slurm
array, written into one OUT, merge by running this once (`python -m autograder merge OUT`).

Each row has a status apart from its score: graded; not run: no GPU (graded, its GPU cases not
run); grader failed (no score: the grader, not the student, failed; grade it again); missing
(on the roster, nothing handed in; no score); and, given a late policy (autograder/late_policy.py),
"; late" after a graded status where the hand-in came after its deadline. A row's total is the
grader's score plus the written answers' scores from answers.csv (autograder/written_scores.py),
less the late penalty.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import hmac
import html
import json
import os
import secrets
import statistics
from collections import Counter
from dataclasses import dataclass, field

from autograder import late_policy, written_scores
from autograder import roster as rosters
from autograder.late_policy import LatePolicy
from autograder.untrusted_files import clean_strings, finite_number
from course.spec.questions import PENDING, WRITTEN
from course.written_whole import written_whole

RESULTS = "results"  # OUT/results/<id>/: one folder per submission
STATE = "grading.json"  # who handed it in, its hash, the grader's version, how the grading ended
# OUT/expected.json: {id: its students} of every submission a sharded batch (Slurm) was asked to
# grade; one whose shard never reached it has no folder, and is reported as not graded.
EXPECTED = "expected.json"
# Gradescope's score upload matches rows by Email (or SID); Total Score is the score.
UPLOAD_COLUMNS = ["Name", "SID", "Email", "Total Score"]
ANONYMISE_KEY = ".anonymise-key"  # OUT/.anonymise-key: the leaderboard's secret, made once
# A row's status, apart from its score (a grader failure is no zero).
GRADED, NO_GPU, FAILED, MISSING, LATE = "graded", "not run: no GPU", "grader failed", "missing", "late"
NO_GPU_OUTPUT = "not run: no GPU"  # how grade.py reports a CUDA case on a machine without one
SLOWEST = 5  # grading_time.md: the whole gradings it names
TIME_ROWS = 15  # grading_time.md: the tests that took the most time, all submissions together
# grading_time.md: a grading's phases (report timings) and what the instructor reads for each
PHASES = (
    ("build_s", "builds"),
    ("inputs_s", "making input sets"),
    ("runs_s", "the submissions' test processes"),
    ("judging_s", "judging"),
    ("baselines_s", "torch's and the reference's runs"),
    ("observed_s", "perf cases' calls under the observer"),
)


@dataclass
class Record:
    id: str
    students: list[dict]
    results: dict | None  # results.json, or None where the grading failed
    state: dict = field(default_factory=dict)
    late: bool = False  # handed in after the deadline of the late policy the reports were given
    written: dict[str, float] = field(default_factory=dict)  # written answers' scores given by hand

    @property
    def score(self) -> float | None:
        """None where there is no grade: a grader failure or a missing hand-in is not a zero.
        The written answers count once the instructor has scored them (answers.csv)."""
        return self.results["score"] + sum(self.written.values()) if self.results else None

    @property
    def handed_in(self) -> float | None:
        when = self.state.get("handed_in")
        return float(when) if finite_number(when) else None

    @property
    def status(self) -> str:
        if self.results is None:
            return MISSING if self.state.get("status") == MISSING else FAILED
        graded = NO_GPU if any(test["output"].startswith(NO_GPU_OUTPUT) for test in self.results["tests"]) else GRADED
        return f"{graded}; {LATE}" if self.late else graded

    @property
    def unit(self) -> str | None:
        """The unit it was graded for, where its files say."""
        extra = (self.results or {}).get("extra_data", {})
        unit = self.state.get("unit") or extra.get("unit")
        return unit if isinstance(unit, str) else None


def read(out: str, roster: list[dict] | None = None, policy: LatePolicy | None = None) -> list[Record]:
    """Every submission's record: those OUT/expected.json names (the class's hand-ins when last
    collected), else every results folder. One whose files are missing or damaged is read as not
    graded, with why: it is listed in failures.md, and the rest of the class is still reported.
    With a roster (autograder/roster.py), its students who handed in nothing come last, missing.
    `policy`: the late policy: a hand-in after its deadline and grace is late."""
    expected = _expected(out)
    if expected:  # a results folder of a hand-in since removed is no longer reported
        entries = set(expected)
    else:
        folder = os.path.join(out, RESULTS)
        entries = {
            entry
            for entry in (os.listdir(folder) if os.path.isdir(folder) else ())
            if os.path.isdir(os.path.join(folder, entry))
        }
    records = [record(out, entry, expected.get(entry)) for entry in sorted(entries)]
    for each in records:
        each.late = policy is not None and late_policy.days_late(policy, each.handed_in) > 0
    return _with_roster(records, roster) if roster is not None else records


def _with_roster(records: list[Record], roster: list[dict]) -> list[Record]:
    """The records with the roster's fields filled in, then a missing record per student of the
    roster that no submission is of."""
    unmatched = list(roster)
    for record in records:
        students = []
        for student in record.students:
            row = next((row for row in roster if rosters.is_theirs(row, record.id, student)), None)
            students.append(rosters.filled_in(row, student) if row else student)
            if row in unmatched:
                unmatched.remove(row)
        record.students = students
    missing = [
        Record(
            "",
            [{"name": row.get("name") or row.get("id", ""), "email": row.get("email", ""), "sid": row.get("sid", "")}],
            None,
            {"status": MISSING},
        )
        for row in unmatched
    ]
    return records + missing


def write_expected(out: str, submissions) -> None:
    """OUT/expected.json for `submissions` (autograder.collect.Submission)."""
    os.makedirs(out, exist_ok=True)
    with _written_file(os.path.join(out, EXPECTED)) as handle:
        json.dump({s.id: [vars(student) for student in s.students] for s in submissions}, handle, indent=2)


def _expected(out: str) -> dict[str, list]:
    expected, problem = _load(out, EXPECTED, _expected_problem)
    return expected if not problem else {}  # no such file: only the folders there are reported


def _expected_problem(expected) -> str:
    if not (
        isinstance(expected, dict) and all(isinstance(v, list) and all(map(_student, v)) for v in expected.values())
    ):
        return "expected an object of submission ids to lists of students"
    return ""


def record(out: str, entry: str, students: list | None = None) -> Record:
    """OUT/results/<entry>/'s record; its results are None where it is not graded or damaged.
    `students`: who handed it in, where its own record cannot say (OUT/expected.json)."""
    where = os.path.join(RESULTS, entry)  # relative to OUT, as failures.md names the files
    state, problem = _load(
        out, os.path.join(where, STATE), _state_problem, missing="missing: its grading never finished (a killed task?)"
    )
    if problem:
        return Record(entry, clean_strings(students or [{"name": entry}]), None, {"status": "failed", "error": problem})
    state = clean_strings(state)  # a name or message a file system gave as surrogates still goes in a CSV
    students = state.get("students") or [{"name": entry}]
    if state["status"] != "graded":
        return Record(entry, students, None, state)
    results, problem = _load(out, os.path.join(where, "results.json"), _results_problem)
    if problem:
        return Record(entry, students, None, {**state, "status": "failed", "error": problem})
    return Record(entry, students, results, state)


def _load(out: str, path: str, problem_of, missing: str = "missing") -> tuple[object, str]:
    """(the JSON document at OUT/path, '') when `problem_of` finds nothing wrong with it; else
    (None, what is wrong, naming the file)."""
    try:
        with open(os.path.join(out, path), encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        return None, f"{path}: {missing}"
    except UnicodeDecodeError as error:  # before ValueError, which it is
        return None, f"{path}: not UTF-8 text ({error.reason} at byte {error.start})"
    except json.JSONDecodeError as error:
        return None, f"{path}: not valid JSON ({error.msg}: line {error.lineno} column {error.colno})"
    except (OSError, ValueError, RecursionError) as error:  # unreadable, or nested past the parser's depth
        return None, f"{path}: could not be read ({type(error).__name__}: {error})"
    problem = problem_of(document)
    return (None, f"{path}: {problem}") if problem else (document, "")


def _shown(value) -> str:
    """A JSON value as a message shows it: a scalar as written, a container by its kind."""
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "an object"
    return json.dumps(value)[:60]


def _text(value) -> bool:
    return isinstance(value, str)


def _tags(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(tag, str) for tag in value)


def _student(value) -> bool:
    return isinstance(value, dict) and all(_text(value.get(key, "")) for key in ("name", "email", "sid"))


STATUSES = ("passed", "failed")
# What the reports read of each test in results.json: (key, check, what it must be).
TEST_FIELDS = (
    ("name", _text, "text"),
    ("score", finite_number, "a number"),
    ("status", STATUSES.__contains__, '"passed" or "failed"'),
    ("output", _text, "text"),
    ("tags", _tags, "a list of one or more tags"),
)


def _state_problem(state) -> str:
    """'' when grading.json holds what the reports read (batch.Grading.finish writes it)."""
    if not isinstance(state, dict):
        return f"holds {_shown(state)}, not an object"
    if state.get("status") not in ("graded", "failed"):
        return f'status is {_shown(state.get("status"))}, not "graded" or "failed"'
    if not isinstance(state.get("error"), (str, type(None))):
        return f"error is {_shown(state['error'])}, not text"
    students = state.get("students")
    if students is not None and not (isinstance(students, list) and all(map(_student, students))):
        return "students is not a list of objects whose name, email and sid are text"
    return ""


def _results_problem(results) -> str:
    """'' when results.json holds what the reports read (report.results_json writes it)."""
    if not isinstance(results, dict):
        return f"holds {_shown(results)}, not an object"
    missing = [key for key in ("score", "tests", "extra_data") if key not in results]
    if missing:
        return f"has no {', '.join(missing)}"
    if not finite_number(results["score"]):
        return f"score is {_shown(results['score'])}, not a number"
    if not isinstance(results["tests"], list) or not isinstance(results["extra_data"], dict):
        return "tests is not a list, or extra_data not an object"
    problems = (_test_problem(number, test) for number, test in enumerate(results["tests"]))
    return next(filter(None, problems), "") or _perf_problem(results["extra_data"].get("perf", {}))


def _test_problem(number: int, test) -> str:
    if not isinstance(test, dict):
        return f"tests[{number}] is {_shown(test)}, not an object"
    for key, fits, expected in TEST_FIELDS:
        if key not in test:
            return f"tests[{number}] has no {key}"
        if not fits(test[key]):
            return f"tests[{number}].{key} is {_shown(test[key])}, not {expected}"
    return ""


def _perf_problem(perf) -> str:
    if not isinstance(perf, dict):
        return f"extra_data.perf is {_shown(perf)}, not an object"
    for name, entry in perf.items():
        if not isinstance(entry, dict) or not finite_number(entry.get("ratio")):
            return f"extra_data.perf[{json.dumps(name)}] has no ratio that is a number"
    return ""


def _groups(records: list[Record]) -> list[str]:
    """The scored test groups: written answers have a column of their own (their scores come
    from answers.csv), and a package's own tests are worth nothing."""
    return sorted(
        {
            t["tags"][0]
            for r in records
            if r.results
            for t in r.results["tests"]
            if t.get("tags") and t.get("max_score", 1)
        }
        - {WRITTEN}
    )


LATE_COLUMNS = ["Days late", "Late penalty", "Late days used"]  # given a late policy


def write_gradebook(records: list[Record], path: str, policy: LatePolicy | None = None) -> None:
    """One row per student (a group submission gives each member the group's score, less the
    member's own late penalty). Where there is no grade (grader failed, missing) the score cells
    are empty, and Status says why. The `written` column: the written answers' scores so far."""
    groups = _groups(records)
    with _written_file(path) as handle:
        writer = csv.writer(handle)
        late_columns = LATE_COLUMNS if policy is not None else []
        writer.writerow(
            UPLOAD_COLUMNS + ["Status"] + groups + [WRITTEN] + late_columns + ["Written answers", "Submission"]
        )
        for record in records:
            by_group = Counter()
            for test in (record.results or {}).get("tests", ()):
                by_group[test["tags"][0] if test.get("tags") else "other"] += test["score"]
            written = written_scores.written_tests(record.results)
            answered = f"{sum(t['status'] == 'passed' for t in written)} of {len(written)}" if written else ""
            graded = record.results is not None
            parts = [f"{by_group[g]:g}" if graded else "" for g in groups]
            parts += [f"{sum(record.written.values()):g}" if graded else ""]
            for student in record.students:
                late = late_policy.lateness(policy, record.handed_in, student) if policy else None
                total = f"{round(record.score * (1 - late.penalty if late else 1), 2):g}" if graded else ""
                writer.writerow(
                    [student.get("name", ""), student.get("sid", ""), student.get("email", "")]
                    + [total, record.status]
                    + parts
                    + (_late_cells(late) if late and graded else [""] * len(late_columns))
                    + [answered, record.id]
                )


def _late_cells(late: late_policy.Lateness) -> list[str]:
    return [str(late.days_late), f"{late.penalty * 100:g}%", str(late.late_days_used)]


@contextlib.contextmanager
def _written_file(path: str):
    """`path` open for writing text, in its place only once whole (a rerun or an upload never
    reads half a report); what UTF-8 cannot encode is replaced, not an error."""
    with (
        written_whole(path) as temporary,
        open(temporary, "w", newline="", encoding="utf-8", errors="replace") as handle,
    ):
        yield handle


def fold_written_scores(records: list[Record], path: str) -> dict[tuple[str, str], float]:
    """The scores answers.csv at `path` gives, each checked against its question's points, set
    as each record's `written`; written_scores.ScoreError names a cell that is not a score."""
    worth = {(r.id, t["name"]): t["max_score"] for r in records for t in written_scores.written_tests(r.results)}
    scores = written_scores.read_scores(path, worth)
    for record in records:
        record.written = {question: s for (who, question), s in scores.items() if who == record.id}
    return scores


def anonymise_key(out: str) -> bytes:
    """OUT/.anonymise-key, made once (random, readable by its owner alone): the anonymous names
    are a keyed hash of the ids, stable across runs, and no classmate can hash a roster to them."""
    path = os.path.join(out, ANONYMISE_KEY)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        with open(path, "rb") as handle:
            key = handle.read()
        if len(key) < 16:
            raise ValueError(
                f"{path}: expected the key --anonymise made (32 random bytes); "
                f"remove it to make a new one (the anonymous names change)"
            ) from None
        return key
    with os.fdopen(fd, "wb") as handle:
        handle.write(secrets.token_bytes(32))
    return anonymise_key(out)


def _label(record: Record, key: bytes | None) -> str:
    if key is not None:  # stable across runs, and not guessable from the list's order or the roster
        return "anon-" + hmac.new(key, record.id.encode("utf-8", "replace"), hashlib.sha256).hexdigest()[:8]
    return ", ".join(s.get("name") or record.id for s in record.students)


def leaderboard_rows(records: list[Record], key: bytes | None) -> tuple[list[str], list[list[str]]]:
    """(header, rows): each submission's score and its perf ratio (torch time / its time)
    per perf case, best total first. `key`: anonymise_key's, to name no one."""
    cases = sorted({name for r in records if r.results for name in r.results["extra_data"].get("perf", {})})
    graded = sorted((r for r in records if r.results), key=lambda r: (-r.score, r.id))
    rows = []
    for rank, record in enumerate(graded, 1):
        perf = record.results["extra_data"].get("perf", {})
        rows.append(
            [str(rank), _label(record, key), f"{record.score:g}"]
            + [f"{perf[c]['ratio']:.2f}x" if c in perf else "-" for c in cases]
        )
    return ["rank", "student", "score"] + cases, rows


def write_leaderboard(records: list[Record], out: str, unit: str, anonymise: bool) -> None:
    header, rows = leaderboard_rows(records, anonymise_key(out) if anonymise else None)
    note = (
        "Perf columns: PyTorch's time over the submission's (higher is faster)."
        if len(header) > 3
        else "This unit has no perf cases: the board ranks by score."
    )
    lines = [f"# Leaderboard: {unit}", "", note, "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)] + [
        "| " + " | ".join(row) + " |" for row in rows
    ]
    with _written_file(os.path.join(out, "leaderboard.md")) as handle:
        handle.write("\n".join(lines) + "\n")
    cells = lambda row, tag: "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in row)  # noqa: E731
    body = "\n".join(f"<tr>{cells(row, 'td')}</tr>" for row in rows)
    with _written_file(os.path.join(out, "leaderboard.html")) as handle:
        handle.write(
            f"<!doctype html><meta charset=utf-8><title>Leaderboard: {html.escape(unit)}</title>\n"
            f"<h1>Leaderboard: {html.escape(unit)}</h1><p>{html.escape(note)}</p>\n"
            f"<table border=1><tr>{cells(header, 'th')}</tr>\n{body}</table>\n"
        )


def failure_summary(records: list[Record]) -> str:
    """For the instructor: the tests the class failed most, with their most common message,
    then the submissions the grader could not grade."""
    failed, messages = Counter(), {}
    for record in records:
        for test in (record.results or {}).get("tests", ()):
            if test["status"] == "failed" and not test["output"].startswith("not run") and WRITTEN not in test["tags"]:
                failed[test["name"]] += 1
                first = (test["output"].strip().splitlines() or [""])[0][:160]
                messages.setdefault(test["name"], Counter())[first] += 1
    graded = sum(1 for r in records if r.results)
    lines = [
        f"# Failures: {graded} submissions graded",
        "",
        "| test | failed by | most common message |",
        "| --- | --- | --- |",
    ]
    for name, count in failed.most_common():
        message = messages[name].most_common(1)[0][0].replace("|", "\\|")
        lines.append(f"| `{name}` | {count} of {graded} | {message} |")
    broken = [r for r in records if r.status == FAILED]
    if broken:
        lines += ["", "## Not graded (the grader itself failed; rerun them)", ""]
        lines += [f"- `{r.id}`: {r.state.get('error') or 'its grading.json gives no reason'}" for r in broken]
    missing = [r for r in records if r.status == MISSING]
    if missing:
        lines += ["", "## Missing (on the roster, nothing handed in)", ""]
        lines += [f"- {_who(r.students[0])}" for r in missing]
    notes = [(r.id, note) for r in records for note in r.state.get("notes") or () if isinstance(note, str)]
    if notes:
        lines += ["", "## Notes on the hand-ins", ""] + [f"- `{who}`: {note}" for who, note in notes]
    return "\n".join(lines) + "\n"


def _who(student: dict) -> str:
    return (
        " ".join(
            filter(
                None,
                [
                    student.get("name"),
                    f"<{student['email']}>" if student.get("email") else "",
                    f"(SID {student['sid']})" if student.get("sid") else "",
                ],
            )
        )
        or "a student"
    )


def time_summary(records: list[Record], rows: int = TIME_ROWS) -> str:
    """For the instructor: the tests the batch spent its time on (each test's seconds on the
    grader's clock), with the submission that took longest on each."""
    seconds: dict[str, list[tuple[float, str]]] = {}
    for record in records:
        for test in (record.results or {}).get("tests", ()):
            extra = test.get("extra_data")
            if isinstance(extra, dict) and finite_number(extra.get("seconds")):
                seconds.setdefault(test["name"], []).append((float(extra["seconds"]), record.id))
    graded = sum(1 for r in records if r.results)
    lines = [f"# Grading time: {graded} submissions graded", ""]
    whole = sorted(
        ((float(r.state["seconds"]), r.id) for r in records if finite_number(r.state.get("seconds"))), reverse=True
    )
    if whole:  # the batch's last minutes are its slowest gradings: name them
        slowest = ", ".join(f"`{who}` {s:.1f}" for s, who in whole[:SLOWEST])
        lines += [
            f"Whole gradings, s: shortest {whole[-1][0]:.1f}, median {statistics.median(s for s, _ in whole):.1f}, "
            f"all together {sum(s for s, _ in whole):.1f}; the slowest: {slowest}.",
            "",
        ]
    totals = _phase_totals(records)
    if totals:  # whether the batch was bound by builds, the host's work or its test processes
        phases = ", ".join(f"{label} {totals[key]:.1f}" for key, label in PHASES if key in totals)
        started = (
            f"; starting test processes took {totals['child_start_s']:.1f} of them" if "child_start_s" in totals else ""
        )
        lines += [f"Phases, all gradings together, s: {phases}{started}.", ""]
    lines += ["| test | all submissions, s | median, s | longest, s (submission) |", "| --- | ---: | ---: | --- |"]
    for name, times in sorted(seconds.items(), key=lambda item: -sum(s for s, _ in item[1]))[:rows]:
        longest, who = max(times)
        lines.append(
            f"| `{name}` | {sum(s for s, _ in times):.1f} | {statistics.median(s for s, _ in times):.1f} "
            f"| {longest:.1f} (`{who}`) |"
        )
    return "\n".join(lines) + "\n"


def _phase_totals(records: list[Record]) -> dict[str, float]:
    """Each phase's seconds (and child_start_s) over the graded records that report it."""
    totals: dict[str, float] = {}
    for record in records:
        extra = (record.results or {}).get("extra_data")
        timings = extra.get("timings") if isinstance(extra, dict) else None
        if not isinstance(timings, dict):
            continue
        for key in [*(key for key, _ in PHASES), "child_start_s"]:
            if finite_number(timings.get(key)):
                totals[key] = totals.get(key, 0.0) + float(timings[key])
    return totals


def feedback_text(results: dict) -> str:
    """The readable twin of results.json, for the student."""
    possible = sum(test["max_score"] for test in results["tests"])
    lines = [f"{results['extra_data']['unit']}: {results['score']:g}/{possible:g} points", ""]
    for test in results["tests"]:
        status = "NOT RUN" if test["output"].startswith("not run") else test["status"].upper()
        if (test.get("extra_data") or {}).get("status") == PENDING:
            status = PENDING.upper()
        lines.append(f"{test['name']}: {status} ({test['score']:g}/{test['max_score']:g})")
        if test["status"] == "failed" or "perf" in test["name"]:
            lines += [f"    {line}" for line in test["output"].strip().splitlines()[:12]]
    return "\n".join(lines) + "\n"


def write_reports(
    out: str, unit: str, anonymise: bool = False, roster: list[dict] | None = None, policy: LatePolicy | None = None
) -> list[Record]:
    """Every report of OUT; the written scores answers.csv holds are folded in and kept."""
    records = read(out, roster, policy)
    answers = os.path.join(out, written_scores.ANSWERS)
    scores = fold_written_scores(records, answers)
    write_gradebook(records, os.path.join(out, "gradebook.csv"), policy)
    with _written_file(answers) as handle:
        csv.writer(handle).writerows(
            [written_scores.COLUMNS]
            + written_scores.answer_rows([(r.students, r.id, r.results) for r in records], scores)
        )
    write_leaderboard(records, out, unit, anonymise)
    with _written_file(os.path.join(out, "failures.md")) as handle:
        handle.write(failure_summary(records))
    with _written_file(os.path.join(out, "grading_time.md")) as handle:
        handle.write(time_summary(records))
    return records


def other_units(out: str, unit: str) -> set[str]:
    """The units other than `unit` that OUT's gradings were for: merging or grading into OUT
    as `unit` would mix two units' grades."""
    return {r.unit for r in read(out) if r.unit and r.unit != unit}
