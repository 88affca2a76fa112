"""The class reports (autograder/gradebook.py) over a results folder where one submission's
files are missing or damaged: that submission is listed as not graded, with the file and
what was wrong, and every other student is still in gradebook.csv, the leaderboard and
failures.md. Then each row's status apart from its score, names that are not UTF-8, a roster,
a removed hand-in, late hand-ins, keyed anonymous names and merge's check of the unit. No grading
runs: the folders are written here as batch.Grading leaves them."""

import csv
import json

import pytest

from autograder import gradebook
from autograder.__main__ import main

UNIT = "day01_relu_bias"
CLASS = {"ada": 3.0, "grace": 2.0}  # the undamaged submissions and their scores


def _results(score: float) -> dict:
    """A results.json as report.results_json writes it, cut to what the reports read."""
    tests = [
        {
            "name": "cpu_values",
            "score": score,
            "max_score": 3.0,
            "status": "passed",
            "output": "",
            "tags": ["values", "cpu"],
        },
        {
            "name": "cpu_perf",
            "score": 0.0,
            "max_score": 1.0,
            "status": "failed",
            "output": "too slow",
            "tags": ["perf", "cpu"],
        },
    ]
    return {"score": score, "tests": tests, "extra_data": {"unit": UNIT, "perf": {"cpu_perf": {"ratio": 0.5}}}}


def _state(who: str) -> dict:
    return {"status": "graded", "error": None, "students": [{"name": who, "email": f"{who}@example.edu", "sid": "1"}]}


def _submission(out, who: str, state=None, results=None):
    """results/<who>/ with grading.json and results.json; bytes are written as they are."""
    folder = out / gradebook.RESULTS / who
    folder.mkdir(parents=True)
    for name, document in ((gradebook.STATE, state), ("results.json", results)):
        if document is not None:
            data = document if isinstance(document, bytes) else json.dumps(document).encode()
            (folder / name).write_bytes(data)


def _class_with(out, **damaged):
    """The class, and "bob" with grading.json and results.json as given (None: not written)."""
    for who, score in CLASS.items():
        _submission(out, who, _state(who), _results(score))
    _submission(out, "bob", damaged.get("state", _state("bob")), damaged.get("results"))


def _reports(out) -> tuple[dict, str, str]:
    gradebook.write_reports(str(out), UNIT)
    with open(out / "gradebook.csv", newline="") as handle:
        rows = {row["Submission"]: row for row in csv.DictReader(handle)}
    return rows, (out / "failures.md").read_text(), (out / "leaderboard.md").read_text()


def _assert_bob_not_graded(out, reason: str):
    rows, failures, board = _reports(out)
    assert {who: float(rows[who]["Total Score"]) for who in CLASS} == CLASS
    assert (rows["bob"]["Total Score"], rows["bob"]["Status"]) == ("", gradebook.FAILED)  # no grade, not a zero
    assert all(rows[who]["Status"] == gradebook.GRADED for who in CLASS)
    assert "# Failures: 2 submissions graded" in failures and "`cpu_perf` | 2 of 2" in failures
    not_graded = failures.split("## Not graded")[1]
    assert f"- `bob`: {reason}" in not_graded, not_graded
    assert all(f"| {who} | {score:g} | 0.50x |" in board for who, score in CLASS.items()) and "bob" not in board


def _without(document: dict, key: str) -> dict:
    return {k: v for k, v in document.items() if k != key}


def _test_edited(**change) -> dict:
    """bob's results.json with its first test changed (a value None: the key removed)."""
    results = _results(1.0)
    test = {**results["tests"][0], **change}
    results["tests"][0] = {k: v for k, v in test.items() if v is not None}
    return results


RESULTS_JSON = "results/bob/results.json"
STATE_JSON = "results/bob/grading.json"


@pytest.mark.parametrize(
    "data, reason",
    [
        (b'{"score": 1.0, "tes', "not valid JSON (Unterminated string starting at: line 1 column 16)"),
        (b"", "not valid JSON (Expecting value: line 1 column 1)"),
    ],
    ids=["truncated", "empty"],
)
def test_a_results_json_that_is_not_json(tmp_path, data, reason):
    _class_with(tmp_path, results=data)
    _assert_bob_not_graded(tmp_path, f"{RESULTS_JSON}: {reason}")


def test_a_results_json_that_is_not_utf8(tmp_path):
    _class_with(tmp_path, results=b'{"score": "\xff"}')
    _assert_bob_not_graded(tmp_path, f"{RESULTS_JSON}: not UTF-8 text (invalid start byte at byte 11)")


@pytest.mark.parametrize("document, shown", [(None, "null"), ([1], "a list")], ids=["null", "list"])
def test_a_results_json_that_is_not_an_object(tmp_path, document, shown):
    _class_with(tmp_path, results=json.dumps(document).encode())
    _assert_bob_not_graded(tmp_path, f"{RESULTS_JSON}: holds {shown}, not an object")


@pytest.mark.parametrize("key", ["score", "tests", "extra_data"])
def test_a_results_json_without_a_key_the_reports_read(tmp_path, key):
    _class_with(tmp_path, results=_without(_results(1.0), key))
    _assert_bob_not_graded(tmp_path, f"{RESULTS_JSON}: has no {key}")


@pytest.mark.parametrize("key", ["status", "tags", "output"])
def test_a_test_entry_without_a_key_the_reports_read(tmp_path, key):
    _class_with(tmp_path, results=_test_edited(**{key: None}))
    _assert_bob_not_graded(tmp_path, f"{RESULTS_JSON}: tests[0] has no {key}")


def test_a_test_entry_without_tags(tmp_path):
    _class_with(tmp_path, results=_test_edited(tags=[]))
    _assert_bob_not_graded(tmp_path, f"{RESULTS_JSON}: tests[0].tags is a list, not a list of one or more tags")


def test_a_perf_entry_without_its_ratio(tmp_path):
    results = _results(1.0)
    results["extra_data"]["perf"]["cpu_perf"] = {"ours_ms": 1.0}
    _class_with(tmp_path, results=results)
    _assert_bob_not_graded(tmp_path, f'{RESULTS_JSON}: extra_data.perf["cpu_perf"] has no ratio that is a number')


@pytest.mark.parametrize(
    "score, shown", [("1", '"1"'), (None, "null"), (float("nan"), "NaN")], ids=["text", "null", "nan"]
)
def test_a_score_that_is_not_a_number(tmp_path, score, shown):
    _class_with(tmp_path, results={**_results(1.0), "score": score})
    _assert_bob_not_graded(tmp_path, f"{RESULTS_JSON}: score is {shown}, not a number")


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"{not json", "not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2)"),
        (b"\xff", "not UTF-8 text (invalid start byte at byte 0)"),
        (b"null", "holds null, not an object"),
        (
            b'{"status": "graded", "students": [1]}',
            "students is not a list of objects whose name, email and sid are text",
        ),
    ],
    ids=["not-json", "not-utf8", "null", "students"],
)
def test_a_damaged_grading_json(tmp_path, data, reason):
    _class_with(tmp_path, state=data, results=_results(1.0))
    _assert_bob_not_graded(tmp_path, f"{STATE_JSON}: {reason}")


def test_a_folder_whose_grading_never_finished_is_listed_not_dropped(tmp_path):
    """A Slurm task killed mid-grading leaves results/<id>/ without grading.json."""
    _class_with(tmp_path, state=None, results=None)
    _assert_bob_not_graded(tmp_path, f"{STATE_JSON}: missing: its grading never finished (a killed task?)")


def test_a_graded_state_without_its_results_json(tmp_path):
    _class_with(tmp_path, results=None)
    _assert_bob_not_graded(tmp_path, f"{RESULTS_JSON}: missing")


def test_merge_over_a_damaged_record_writes_the_reports_and_exits_1(tmp_path, capsys):
    _class_with(tmp_path, results=b"")
    assert main(["merge", str(tmp_path), "--unit", UNIT]) == 1
    assert "merged 3 gradings" in capsys.readouterr().err
    _assert_bob_not_graded(tmp_path, f"{RESULTS_JSON}: not valid JSON (Expecting value: line 1 column 1)")


def test_a_submission_no_shard_reached_is_listed_by_who_handed_it_in(tmp_path):
    """A Slurm task killed before it reached carol leaves no folder of hers: OUT/expected.json,
    written when the array was made, still puts her in the gradebook (by email, for the upload)
    and in failures.md."""
    from autograder.collect import Student, Submission

    for who, score in CLASS.items():
        _submission(tmp_path, who, _state(who), _results(score))
    carol = Submission("carol", "/class/carol.zip", (Student("Carol Shaw", "carol@example.edu", "7"),))
    gradebook.write_expected(str(tmp_path), [carol] + [Submission(who, f"/class/{who}.zip", ()) for who in CLASS])
    rows, failures, _ = _reports(tmp_path)
    assert {who: float(rows[who]["Total Score"]) for who in CLASS} == CLASS
    assert rows["carol"]["Email"] == "carol@example.edu" and rows["carol"]["Total Score"] == ""
    assert "- `carol`: results/carol/grading.json: missing" in failures.split("## Not graded")[1]


def test_grading_time_adds_up_each_tests_seconds_and_names_the_longest(tmp_path):
    """grading_time.md: each test's seconds over the class, most first, from each results.json,
    and each whole grading's from its grading.json, slowest named first; a seconds value that is
    not a number is passed over, its submission still counted."""
    for who, seconds in (("ada", 2.0), ("grace", 10.0), ("bob", "slow")):
        results = _results(1.0)
        results["tests"][0]["extra_data"] = {"seconds": seconds}
        results["tests"][1]["extra_data"] = {"seconds": 0.5}
        results["extra_data"]["timings"] = {
            "build_s": 20.0,
            "inputs_s": 1.5,
            "runs_s": seconds,
            "judging_s": 0.5,
            "child_start_s": 4.0,
        }
        _submission(tmp_path, who, {**_state(who), "seconds": seconds if who != "ada" else 30.0}, results)
    gradebook.write_reports(str(tmp_path), UNIT)
    text = (tmp_path / "grading_time.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert text.startswith("# Grading time: 3 submissions graded")
    assert (
        "Whole gradings, s: shortest 10.0, median 20.0, all together 40.0; the slowest: `ada` 30.0, `grace` 10.0."
    ) in text
    assert (
        "Phases, all gradings together, s: builds 60.0, making input sets 4.5, the submissions' test "
        "processes 12.0, judging 1.5; starting test processes took 12.0 of them."
    ) in text  # bob's "slow" left out
    assert rows == ["| `cpu_values` | 12.0 | 6.0 | 10.0 (`grace`) |", "| `cpu_perf` | 1.5 | 0.5 | 0.5 (`grace`) |"]


def _rows(out) -> list[dict]:
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_a_name_and_an_error_that_are_not_utf8_still_make_every_report(tmp_path, capsys):
    """A grading.json whose name and error hold surrogates (a file name that was not UTF-8, as an
    earlier grader wrote it) is reported printably, and merge ends."""
    _class_with(
        tmp_path,
        state={
            "status": "failed",
            "error": "the grader failed on it: /class/bo\udcffb.zip",
            "students": [{"name": "bo\udcffb", "email": "", "sid": ""}],
        },
    )
    assert main(["merge", str(tmp_path), "--unit", UNIT]) == 1  # bob is not graded
    rows = {row["Submission"]: row for row in _rows(tmp_path)}
    assert rows["bob"]["Name"] == "bo?b" and rows["bob"]["Status"] == gradebook.FAILED
    assert "/class/bo?b.zip" in (tmp_path / "failures.md").read_text(encoding="utf-8")


def test_a_grading_whose_gpu_cases_were_not_run_says_so(tmp_path):
    results = _results(3.0)
    results["tests"].append(
        {
            "name": "cuda_values",
            "score": 0.0,
            "max_score": 3.0,
            "status": "failed",
            "output": "not run: no GPU on the grading machine",
            "tags": ["values", "cuda"],
        }
    )
    _submission(tmp_path, "ada", _state("ada"), results)
    _submission(tmp_path, "grace", _state("grace"), _results(2.0))
    gradebook.write_reports(str(tmp_path), UNIT)
    assert {row["Submission"]: (row["Status"], row["Total Score"]) for row in _rows(tmp_path)} == {
        "ada": (gradebook.NO_GPU, "3"),
        "grace": (gradebook.GRADED, "2"),
    }


ROSTER = (
    "Email,Name,ID,Section\nada@example.edu,Ada Lovelace,,A\nbob@example.edu,Bob Bobson,bob,B\n,Carol Shaw,carol,A\n"
)


def test_a_roster_lists_who_handed_in_nothing_as_missing(tmp_path):
    """Carol is on the roster with no hand-in: a row with no score, status missing. Ada and bob
    get the roster's names, bob its email too; grace, on no roster line, is still reported."""
    from autograder.roster import read_roster

    _class_with(
        tmp_path, state={**_state("bob"), "students": [{"name": "bob", "email": "", "sid": ""}]}, results=_results(1.0)
    )
    (tmp_path / "roster.csv").write_text("\ufeff" + ROSTER, encoding="utf-8")  # as a spreadsheet saves it
    roster = read_roster(str(tmp_path / "roster.csv"))
    gradebook.write_reports(str(tmp_path), UNIT, roster=roster)
    rows = [(r["Name"], r["Email"], r["Total Score"], r["Status"], r["Submission"]) for r in _rows(tmp_path)]
    assert rows == [
        ("Ada Lovelace", "ada@example.edu", "3", gradebook.GRADED, "ada"),
        ("Bob Bobson", "bob@example.edu", "1", gradebook.GRADED, "bob"),
        ("grace", "grace@example.edu", "2", gradebook.GRADED, "grace"),
        ("Carol Shaw", "", "", gradebook.MISSING, ""),
    ]
    assert "## Missing (on the roster, nothing handed in)\n\n- Carol Shaw\n" in (tmp_path / "failures.md").read_text()


def test_a_roster_fills_in_what_a_hand_in_does_not_say(tmp_path):
    from autograder import roster

    row = {"id": "ab12", "name": "Ada Lovelace", "email": "ada@example.edu"}
    assert roster.is_theirs(row, "ab12", {"name": "whatever"})
    assert roster.is_theirs(row, "x", {"name": "", "email": " ADA@example.edu"})
    assert not roster.is_theirs(row, "x", {"name": "Grace", "email": "grace@example.edu"})
    assert roster.filled_in(row, {"name": "ab12", "email": "", "sid": ""}) == {
        "name": "Ada Lovelace",
        "email": "ada@example.edu",
        "sid": "",
    }
    assert roster.filled_in(row, {"name": "", "email": "ada@gradescope.example", "sid": "7"}) == {
        "name": "Ada Lovelace",
        "email": "ada@gradescope.example",
        "sid": "7",
    }


@pytest.mark.parametrize("text", ["Student,Section\nada,A\n", "", b"\xff\xfe"], ids=["columns", "empty", "utf8"])
def test_a_roster_without_the_columns_is_an_error_naming_it(tmp_path, text):
    from autograder.roster import read_roster

    path = tmp_path / "roster.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError, match=f"--roster '{path}': expected a"):
        read_roster(str(path))


def test_a_hand_in_removed_since_drops_out_of_the_reports(tmp_path):
    """OUT/expected.json (the class as last collected) no longer names bob: his old results stay
    on disk, and the gradebook leaves him out."""
    from autograder.collect import Submission

    _class_with(tmp_path, results=_results(1.0))
    gradebook.write_expected(str(tmp_path), [Submission(who, f"/class/{who}.zip", ()) for who in CLASS])
    rows, _, board = _reports(tmp_path)
    assert set(rows) == set(CLASS) and "bob" not in board
    assert (tmp_path / gradebook.RESULTS / "bob" / "results.json").exists()


def test_the_anonymous_names_are_keyed_by_a_secret_kept_with_the_results(tmp_path):
    """Not the sha256 of the id, which any classmate could compute from a roster: an HMAC under
    OUT/.anonymise-key, made once, readable by its owner alone, the same names on every run."""
    import hashlib
    import os
    import stat

    _class_with(tmp_path, results=_results(1.0))
    gradebook.write_reports(str(tmp_path), UNIT, anonymise=True)
    board = (tmp_path / "leaderboard.md").read_text()
    key = tmp_path / gradebook.ANONYMISE_KEY
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert not any(name in board for name in [*CLASS, "bob"]) and board.count("| anon-") == 3
    assert not any(hashlib.sha256(who.encode()).hexdigest()[:8] in board for who in CLASS)
    gradebook.write_reports(str(tmp_path), UNIT, anonymise=True)
    assert (tmp_path / "leaderboard.md").read_text() == board  # stable across runs
    key.write_bytes(b"short")
    with pytest.raises(ValueError, match="expected the key --anonymise made"):
        gradebook.write_reports(str(tmp_path), UNIT, anonymise=True)


def test_merge_as_another_unit_is_refused(tmp_path, capsys):
    _class_with(tmp_path, results=_results(1.0))
    with pytest.raises(SystemExit) as exit_:
        main(["merge", str(tmp_path), "--unit", "day02_layernorm_forward"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--unit day02_layernorm_forward" in err and f"holds gradings of {UNIT}" in err
    assert not (tmp_path / "gradebook.csv").exists()


def test_a_hand_in_after_the_due_time_is_late(tmp_path, capsys):
    """grading.json says when each was handed in; merge --due marks the later ones late (a
    grade still), and a due time it cannot read is named."""
    for who, handed_in in (("ada", 1000.0), ("grace", 3000.0)):
        _submission(tmp_path, who, {**_state(who), "handed_in": handed_in}, _results(CLASS[who]))
    due = "1970-01-01T00:30:00+00:00"  # 1800 s
    assert main(["merge", str(tmp_path), "--unit", UNIT, "--due", due]) == 0
    assert {r["Submission"]: (r["Status"], r["Total Score"]) for r in _rows(tmp_path)} == {
        "ada": (gradebook.GRADED, "3"),
        "grace": (f"{gradebook.GRADED}; {gradebook.LATE}", "2"),
    }
    with pytest.raises(SystemExit):
        main(["merge", str(tmp_path), "--unit", UNIT, "--due", "Friday"])
    assert "--due 'Friday': expected a date and time" in capsys.readouterr().err
