"""The student bundle holds what students need and nothing the grader keeps: no solution
region, no hidden test's name, no reference source, no mutant."""

import io
import os
import re
import subprocess
import zipfile

import nbformat
import pytest

from course.authoring import release
from course.authoring.release import main
from course.spec import mutants, units

UNITS = units.all_units()
REPOSITORY = "some-school/kernels-2031"
MIN_LINE = 12  # shorter lines ("}", "return y;") are common to solutions and templates alike


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "students"
    assert main([str(out), "--all", "--repository", REPOSITORY]) == 0
    with zipfile.ZipFile(f"{out}.zip") as archive:
        zipped = {name.split("/", 1)[1]: archive.read(name) for name in archive.namelist()}
    files = {}
    for root, _, names in os.walk(out):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, out)] = handle.read()
    assert zipped == files  # the zip is the folder
    texts = {path: data.decode() for path, data in files.items() if not path.endswith(".whl")}
    for path in (path for path in files if path.endswith(".whl")):  # the runtime's wheel: its files, read
        with zipfile.ZipFile(io.BytesIO(files[path])) as wheel:
            texts.update({f"{path}!/{name}": wheel.read(name).decode() for name in wheel.namelist()})
    return texts


def _unit_part(bundle, unit) -> str:
    """The bundle's text a unit's students get: its notebook's cells, its templates, its public
    tests, the shared test pieces and the README. Another unit's files may share names or lines
    with it by design (a later unit's public test named like an earlier hidden one; files
    `[given]` solved to a later unit), so each unit is checked against its own part."""
    notebook = nbformat.reads(bundle[f"notebooks/{unit.name}.ipynb"], as_version=4)
    mine = (f"src_templates/{unit.name}/", f"public_tests/{unit.name}/", "public_tests/common/", "README.md")
    runtime = [
        text
        for path, text in bundle.items()
        if path.startswith("runtime/")
        and ("/units/" not in path or f"/units/{unit.name}/" in path or "/units/common/" in path)
    ]
    return "\n".join(
        [cell.source for cell in notebook.cells]
        + runtime
        + [text for path, text in bundle.items() if path.startswith(mine)]
    )


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines()}


def _starter_lines(unit) -> set[str]:
    return set().union(*(_lines(unit.template(file)) for file in unit.files))


def _solution_lines(unit, file) -> set[str]:
    """Lines of the reference that no starter file of the unit has: what students write."""
    return {line for line in _lines(unit.solution(file)) - _starter_lines(unit) if len(line) >= MIN_LINE}


def test_bundle_has_every_units_student_material(bundle):
    for unit in UNITS:
        notebook = nbformat.reads(bundle[f"notebooks/{unit.name}.ipynb"], as_version=4)
        assert notebook.metadata["course"] == {"unit": unit.name, "version": "student"}
        for file in unit.files:
            assert bundle[f"src_templates/{unit.name}/{file}"] == unit.template(file)
        assert f"public_tests/{unit.name}/public_tests.py" in bundle
        assert release.colab_url(REPOSITORY, "main", unit) in bundle["README.md"]
    assert "cuda-extensions-course/cuda-extensions-course" not in bundle["README.md"]
    assert {path.split("/")[0] for path in bundle} == {
        "README.md",
        "notebooks",
        "src_templates",
        "public_tests",
        "runtime",
        release.MARKER,
    }


def test_no_solution_region_or_reference_source(bundle):
    everything = "\n".join(bundle.values())
    assert not re.search(r"(//|#)\s*(BEGIN SOLUTION|END SOLUTION|STUB)\s*$", everything, re.MULTILINE)
    for unit in UNITS:
        part = _unit_part(bundle, unit)
        for file in unit.sources:
            leaked = _solution_lines(unit, file) & _lines(part)
            assert not leaked, f"{unit.name}/{file}: solution lines in the bundle: {sorted(leaked)[:3]}"
            if unit.solution(file) != unit.template(file):
                assert unit.solution(file) not in part, f"{unit.name}/{file}: the reference is in the bundle"


def test_no_hidden_test_name(bundle):
    everything = "\n".join(bundle.values())
    for unit in UNITS:
        if not unit.has_tests():
            continue
        part = _unit_part(bundle, unit)
        hidden = {c.name for c in unit.tests(hidden=True).CASES} - {c.name for c in unit.tests(hidden=False).CASES}
        found = [name for name in hidden if re.search(rf"\b{re.escape(name)}\b", part)]
        assert not found, f"{unit.name}: hidden test names in the bundle: {found[:5]}"
        with open(unit.suite_path(hidden=True), encoding="utf-8") as handle:
            assert handle.read() not in everything


def test_no_mutant(bundle, tmp_path):
    """No mutants.toml, and no line that a mutant adds to the reference."""
    assert not any(path.endswith("mutants.toml") or "hidden_tests" in path for path in bundle)
    for unit in UNITS:
        part = _lines(_unit_part(bundle, unit))
        for mutant in mutants.load(unit).values():
            assert mutant.about not in "\n".join(part), f"{unit.name}: mutant {mutant.name}'s description leaked"
            folder = tmp_path / unit.name / mutant.name
            mutants.write(unit, mutant, str(folder))
            for file in {edit["file"] for edit in mutant.edits}:
                added = _lines((folder / file).read_text()) - _lines(unit.solution(file)) - _starter_lines(unit)
                leaked = {line for line in added if len(line) >= MIN_LINE} & part
                assert not leaked, f"{unit.name}: mutant {mutant.name}'s code is in the bundle: {sorted(leaked)[:2]}"


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--unit", "day01_relu_bias", "--all"], "or pass --all for every unit"),
        ([], "name the units to release"),
    ],
)
def test_units_are_named_or_all_asked_for(tmp_path, capsys, argv, said):
    """Never every unit by default: day03's starter code holds day02's solved files."""
    with pytest.raises(SystemExit):
        main([str(tmp_path / "out"), *argv])
    assert said in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_only_a_new_or_empty_folder_an_earlier_bundle_or_a_git_checkout_is_written(tmp_path, capsys, monkeypatch):
    """A folder of other work, the current folder or the repository is refused, and nothing in
    it is touched."""
    work = tmp_path / "work"
    (work / "notes").mkdir(parents=True)
    (work / "notes" / "keep.txt").write_text("mine")
    monkeypatch.chdir(work)
    for out in (str(work), ".", "./", str(tmp_path), units.REPO):
        with pytest.raises(SystemExit):
            main([out, "--unit", "day01_relu_bias"])
        assert "OUT" in capsys.readouterr().err
    assert (work / "notes" / "keep.txt").read_text() == "mine"
    assert main(["students", "--unit", "day01_relu_bias"]) == 0  # new
    assert main(["students", "--unit", "day01_relu_bias"]) == 0  # an earlier bundle
    (work / "students" / release.MARKER).unlink()
    with pytest.raises(SystemExit):
        main(["students", "--unit", "day01_relu_bias"])


def _git(folder, *argv) -> str:
    return subprocess.run(["git", "-C", str(folder), *argv], check=True, capture_output=True, text=True).stdout


def test_a_release_updates_a_git_checkout_in_place(tmp_path):
    """release, commit, release one more unit: .git and the instructor's own files stay, the
    earlier unit stays, and git sees only the new unit's files and the ones that changed."""
    out = tmp_path / "students"
    out.mkdir()
    _git(out, "init", "-q")
    (out / "LICENSE").write_text("the school's licence")
    assert main([str(out), "--unit", "day01_relu_bias"]) == 0
    _git(out, "add", "-A")
    _git(out, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "day01")
    assert main([str(out), "--unit", "day02_layernorm_forward"]) == 0
    changed = {line[3:] for line in _git(out, "status", "--porcelain", "-uall").splitlines()}
    assert (out / ".git").is_dir() and (out / "LICENSE").read_text() == "the school's licence"
    assert (out / "notebooks" / "day01_relu_bias.ipynb").exists()
    assert {"notebooks/day02_layernorm_forward.ipynb", "README.md", release.MARKER} <= changed
    assert not any("day01" in path for path in changed), changed
    assert main([str(out), "--unit", "day02_layernorm_forward"]) == 0  # nothing new: nothing written
    assert {line[3:] for line in _git(out, "status", "--porcelain", "-uall").splitlines()} == changed


def test_a_bad_repository_is_refused_by_name(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([str(tmp_path / "out"), "--repository", "not a repository"])
    assert "--repository" in capsys.readouterr().err


def test_the_leak_checks_have_something_to_look_for():
    """Every unit has solution lines the checks above search the bundle for."""
    for unit in UNITS:
        assert any(_solution_lines(unit, file) for file in unit.sources), unit.name
