"""What collect makes of a class's hand-ins when they are not as expected: a broken or odd
submission_metadata.yml is a clear error naming the file, keys that collide or point outside
the export, upper-case suffixes, entries that are not hand-ins, names with no ASCII letters or
that are not UTF-8, submitters without an email, two hand-ins of one student, and a zip holding
two copies of one source."""

import os
import zipfile

import pytest

from autograder import collect
from course.spec import units

UNIT = units.load("day01_relu_bias")
ADA = "  :submitters:\n  - :name: Ada Lovelace\n    :email: ada@example.edu\n    :sid: '1001'\n"


def _export(root, metadata, folders=("submission_1",)):
    """An export whose metadata is `metadata` (text or bytes), with a notebook in each folder."""
    for name in folders:
        (root / name).mkdir(parents=True)
        (root / name / "handin.ipynb").write_text("{}")
    if isinstance(metadata, bytes):
        (root / collect.METADATA).write_bytes(metadata)
    else:
        (root / collect.METADATA).write_text(metadata, encoding="utf-8")
    return str(root)


@pytest.mark.parametrize(
    "metadata",
    [
        "submission_1: [1, 2\n",  # ParserError
        "submission_1: a: b\n",  # ScannerError
        "submission_1: *nowhere\n",  # ComposerError
        "submission_1: !!python/object:os.system {}\n",  # ConstructorError (an unknown tag)
        b"submission_1:\n  :name: \xff\xfe\n",  # not UTF-8
    ],
    ids=["parser", "scanner", "composer", "constructor", "utf8"],
)
def test_unreadable_metadata_is_an_error_naming_the_file(tmp_path, metadata):
    with pytest.raises(ValueError, match=collect.METADATA):
        collect.collect(_export(tmp_path, metadata), UNIT)


def test_metadata_that_is_a_folder_is_an_error_naming_it(tmp_path):
    (tmp_path / collect.METADATA).mkdir()
    with pytest.raises(ValueError, match=collect.METADATA):
        collect.collect(str(tmp_path), UNIT)


@pytest.mark.parametrize(
    "entry",
    [
        " hello\n",
        "\n  :submitters: hello\n",
        "\n  :submitters:\n  - ada\n",
        "\n  :submitters:\n  - ~\n",
        " [{':name': Ada}]\n",
    ],
    ids=["entry-text", "submitters-text", "submitter-text", "submitter-null", "entry-list"],
)
def test_a_misshapen_entry_is_an_error_naming_it(tmp_path, entry):
    with pytest.raises(ValueError, match=f"{collect.METADATA}: entry 'submission_1': expected a mapping"):
        collect.collect(_export(tmp_path, "submission_1:" + entry), UNIT)


def test_keys_with_the_same_safe_id_get_distinct_ids(tmp_path):
    keys = ["submission 1", "submission_1", "日本", "中文"]
    metadata = "".join(f"{key}:\n{ADA}" for key in keys)
    found = collect.collect(_export(tmp_path, metadata, keys), UNIT)
    ids = [s.id for s in found]
    assert len(set(ids)) == len(keys) and all(i.isascii() for i in ids)
    assert sorted(s.path for s in found) == sorted(str(tmp_path / key / "handin.ipynb") for key in keys)


def test_a_key_yaml_reads_as_a_number_names_its_folder(tmp_path):
    found = collect.collect(_export(tmp_path, f"123:\n{ADA}submission_1:\n{ADA}", ("123", "submission_1")), UNIT)
    assert [s.id for s in found] == ["123", "submission_1"]


@pytest.mark.parametrize("key", ["..", ".", "/tmp", "submission_1/..", "''"])
def test_keys_that_name_no_folder_of_the_export_are_refused(tmp_path, key):
    with pytest.raises(ValueError, match=f"{collect.METADATA}: entry "):
        collect.collect(_export(tmp_path, f"{key}:\n{ADA}"), UNIT)


def test_an_upload_in_a_submission_folder_is_found_whatever_its_suffix_case(tmp_path):
    export = _export(tmp_path, f"submission_1:\n{ADA}", ())
    (tmp_path / "submission_1").mkdir()
    (tmp_path / "submission_1" / "HANDIN.ZIP").write_bytes(b"")
    assert [s.path for s in collect.collect(export, UNIT)] == [str(tmp_path / "submission_1" / "HANDIN.ZIP")]


def test_a_submitter_without_an_email_is_warned_about(tmp_path, capsys):
    metadata = "submission_1:\n  :submitters:\n  - :name: Grace Hopper\n    :sid: '1003'\n"
    found = collect.collect(_export(tmp_path, metadata), UNIT)
    assert found[0].students == (collect.Student("Grace Hopper", "", "1003"),)
    assert "Grace Hopper" in capsys.readouterr().err


def test_a_folder_in_the_export_that_the_metadata_does_not_name_is_warned_about(tmp_path, capsys):
    found = collect.collect(_export(tmp_path, f"submission_1:\n{ADA}", ("submission_1", "submission_2")), UNIT)
    assert [s.id for s in found] == ["submission_1"]
    assert "submission_2" in capsys.readouterr().err


def test_suffixes_are_read_in_any_case_and_other_entries_are_reported(tmp_path, capsys):
    for name in ("Bob.ZIP", "x.IPYNB", "notes.txt", ".DS_Store"):
        (tmp_path / name).write_text("")
    found = collect.collect(str(tmp_path), UNIT)
    assert [(s.id, s.path) for s in found] == [("Bob", str(tmp_path / "Bob.ZIP")), ("x", str(tmp_path / "x.IPYNB"))]
    err = capsys.readouterr().err
    assert "notes.txt" in err and ".DS_Store" not in err  # hidden files are no one's hand-in


def test_a_name_with_no_ascii_letters_is_kept_for_display(tmp_path):
    for name in ("日本.zip", "中文.zip", "Ada Lovelace.zip"):
        (tmp_path / name).write_bytes(b"")
    found = collect.collect(str(tmp_path), UNIT)
    assert sorted(s.students[0].name for s in found) == ["Ada Lovelace", "中文", "日本"]
    assert len({s.id for s in found}) == 3 and all(s.id.isascii() and "/" not in s.id for s in found)


def test_a_notebook_named_in_upper_case_is_read_as_one(tmp_path):
    """Collected whatever its suffix's case, and read as a notebook at grading, not refused."""
    import shutil

    from autograder.submission import read_submission

    shutil.copy(f"{units.REPO}/notebooks/instructor/{UNIT.name}.ipynb", tmp_path / "BOB.IPYNB")
    files, _ = read_submission(str(tmp_path / "BOB.IPYNB"), UNIT)
    assert files == {name: UNIT.solution(name) for name in UNIT.files}


def test_a_name_with_no_ascii_letters_keeps_its_id_whoever_else_hands_in(tmp_path):
    """Its results folder must not move when another such student joins the class."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "日本.zip").write_bytes(b"PK")
    before = {s.students[0].name: s.id for s in collect.collect(str(tmp_path / "a"), UNIT)}
    (tmp_path / "a" / "中文.zip").write_bytes(b"PK")
    after = {s.students[0].name: s.id for s in collect.collect(str(tmp_path / "a"), UNIT)}
    assert after["日本"] == before["日本"] and after["中文"] != after["日本"]


def test_a_name_utf8_cannot_write_is_cleaned_so_the_gradebook_can_be(tmp_path):
    found = collect.collect(
        _export(tmp_path, 'submission_1:\n  :submitters:\n  - :name: "Ada \\ud800"\n    :email: ada@example.edu\n'),
        UNIT,
    )
    name = found[0].students[0].name
    assert name.startswith("Ada") and name.encode("utf-8")


def test_a_file_name_that_is_not_utf8_is_collected_printable_and_hashed(tmp_path, capsys):
    """A name made on another system (bytes that are not UTF-8) is graded from its own path; the
    student's name shows U+FFFD for those bytes, so it prints and goes into the gradebook."""
    from autograder.batch import content_hash

    folder = os.fsencode(tmp_path)
    with open(os.path.join(folder, b"al\xffice.ipynb"), "w") as handle:
        handle.write("{}")
    os.makedirs(os.path.join(folder, b"bob"))
    with open(os.path.join(folder, b"bob", b"not\xfeutf8.cu"), "w") as handle:
        handle.write("// a file of bob's")
    with open(os.path.join(folder, b"notes\xff.txt"), "w"):  # not a hand-in: warned about, printably
        pass
    found = collect.collect(str(tmp_path), UNIT)
    assert [(s.id, s.students[0].name) for s in found] == [("al_ice", "al\ufffdice"), ("bob", "bob")]
    assert os.path.exists(found[0].path) and found[0].path.encode("utf-8", "surrogateescape")
    assert all(s.students[0].name.encode("utf-8") for s in found)
    assert content_hash(found[1].path) != content_hash(found[0].path)  # a folder holding such a name
    assert "notes\ufffd.txt: skipped" in capsys.readouterr().err


def _handed_in(path, mtime: float, text: str = "{}"):
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def test_two_hand_ins_of_one_student_grade_the_newest_and_warn(tmp_path, capsys):
    """alice.zip and Alice.ipynb are one student's: the newer is graded, and the note names both."""
    _handed_in(tmp_path / "alice.zip", 1000)
    _handed_in(tmp_path / "Alice.ipynb", 2000)
    _handed_in(tmp_path / "bob.ipynb", 1000)
    found = collect.collect(str(tmp_path), UNIT)
    assert [(s.id, os.path.basename(s.path)) for s in found] == [("Alice", "Alice.ipynb"), ("bob", "bob.ipynb")]
    assert "graded Alice.ipynb" in found[0].notes[0] and "not graded: alice.zip" in found[0].notes[0]
    assert found[1].notes == ()
    assert "2 hand-ins of Alice" in capsys.readouterr().err


def test_two_hand_ins_as_new_grade_the_zip(tmp_path):
    for name in ("carol.ipynb", "carol.zip"):
        _handed_in(tmp_path / name, 1000)
    found = collect.collect(str(tmp_path), UNIT)
    assert [(s.id, os.path.basename(s.path)) for s in found] == [("carol", "carol.zip")]
    assert "not graded: carol.ipynb" in found[0].notes[0]


def test_a_zip_with_two_copies_of_one_source_is_refused_naming_both(tmp_path):
    from autograder.submission import SubmissionError, read_submission

    source = next(name for name in UNIT.files if name not in UNIT.common)
    with zipfile.ZipFile(tmp_path / "handin.zip", "w") as archive:
        archive.writestr(f"old/{source}", "// the first try")
        archive.writestr(f"new/{source}", "// the second")
    with pytest.raises(SubmissionError, match=f"two copies of {source}: 'old/{source}' and 'new/{source}'"):
        read_submission(str(tmp_path / "handin.zip"), UNIT)


def test_when_each_was_handed_in_is_read(tmp_path):
    """Gradescope's created_at (YAML reads it as a time), else the hand-in's modification time."""
    export = _export(
        tmp_path / "export",
        f"submission_1:\n{ADA}  :created_at: 2031-01-01 12:00:00.000000000 -05:00\nsubmission_2:\n{ADA}",
        ("submission_1", "submission_2"),
    )
    found = collect.collect(export, UNIT)
    assert [s.handed_in for s in found] == [1925053200.0, None]
    (tmp_path / "class").mkdir()
    _handed_in(tmp_path / "class" / "bob.zip", 1234.0)
    assert collect.collect(str(tmp_path / "class"), UNIT)[0].handed_in == 1234.0


def _submit_zip(path, student, manifest=None):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("manifest.json", manifest if manifest is not None else f'{{"student": "{student}"}}')
        archive.writestr("day01_relu_bias/relu_bias.cpp", "// mine\n")


def test_a_manifests_student_id_is_shown_never_trusted(tmp_path):
    """A manifest is the student's own text: a zip naming someone else's id neither merges with
    nor replaces that student's hand-in; the claim is a note beside the file's name, and an
    unreadable manifest is no claim."""
    _submit_zip(tmp_path / "alice.zip", "alice")
    _submit_zip(tmp_path / "mallory.zip", "alice")  # newer, claiming to be alice
    _submit_zip(tmp_path / "bob.zip", "", manifest="{not json")
    _submit_zip(tmp_path / "carol.zip", "", manifest='{"student": ["no"]}')
    found = {submission.id: submission for submission in collect.collect(str(tmp_path), UNIT)}
    assert set(found) == {"alice", "mallory", "bob", "carol"}
    assert found["mallory"].students[0] == collect.Student(name="mallory")
    assert any("names student 'alice'" in note for note in found["mallory"].notes)
    assert not found["bob"].notes and not found["carol"].notes
