"""Generated files (templates, notebooks) must match what solutions/ generates."""

import os
import re

import nbformat
import pytest

from course.authoring import generate
from course.authoring.generate import SOURCE_MAGIC, generated_files, notebook_paths
from course.spec import regions, units

UNITS = [u.name for u in units.all_units()]


def test_generated_files_are_up_to_date(capsys):
    stale = generate.main(["--check"])
    assert stale == 0, "stale generated files (run python -m course.authoring.generate):\n" + capsys.readouterr().out


def test_check_names_the_stale_file_when_a_solution_changes(monkeypatch, capsys):
    original = units.Unit.raw

    def edited(self, file):
        text = original(self, file)
        return text + "// an edit nobody regenerated\n" if file == self.sources[0] else text

    monkeypatch.setattr(units.Unit, "raw", edited)
    assert generate.main(["--check"]) == 1
    out = capsys.readouterr().out
    for unit in units.all_units():
        assert f"src_templates/{unit.name}/{unit.sources[0]}" in out


def _source_cells(path):
    cells = {}
    for cell in nbformat.read(path, as_version=4).cells:
        first, _, body = cell.source.partition("\n")
        if cell.cell_type == "code" and first.startswith(SOURCE_MAGIC):
            cells[first.split()[1].split("/", 1)[1]] = body  # unit/file
    return cells


@pytest.mark.parametrize("name", UNITS)
def test_student_notebook_writes_exactly_the_template_files(name):
    unit = units.load(name)
    cells = _source_cells(os.path.join(unit.repo, "notebooks", f"{name}.ipynb"))
    assert sorted(cells) == sorted(unit.files)
    for file, body in cells.items():
        with open(os.path.join(unit.repo, "src_templates", name, file), encoding="utf-8") as handle:
            assert body == handle.read(), f"{file} in the notebook differs from src_templates"


def test_a_file_without_its_source_line_in_the_lesson_is_refused(monkeypatch):
    unit = units.load(UNITS[0])
    files = units.Unit.files.fget
    monkeypatch.setattr(units.Unit, "files", property(lambda self: files(self) + ("extra.h",)))
    with pytest.raises(ValueError, match="no <!-- source FILE --> line for extra.h"):
        generate.lesson_cells(unit, solved=False)


@pytest.mark.parametrize("name", UNITS)
def test_instructor_notebook_writes_the_solution(name):
    unit = units.load(name)
    cells = _source_cells(os.path.join(unit.repo, "notebooks", "instructor", f"{name}.ipynb"))
    assert {f: cells[f] for f in unit.files} == {f: unit.solution(f) for f in unit.files}


@pytest.mark.parametrize("name", UNITS)
def test_every_stub_names_its_day(name):
    """A template that differs from the solution by more than its planted bugs names a TODO."""
    unit = units.load(name)
    for file in unit.sources:
        template = unit.template(file)
        if template != regions.bugged_text(unit.raw(file), file):
            assert f"TODO({unit.day})" in template or f'COURSE_TODO("{unit.day}:' in template


@pytest.mark.parametrize("name", UNITS)
def test_readme_links_every_notebook(name):
    with open(os.path.join(units.REPO, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    assert f"notebooks/{name}.ipynb" in readme and f"notebooks/instructor/{name}.ipynb" in readme


@pytest.mark.parametrize("name", UNITS)
def test_perf_thresholds_in_the_notebook_are_the_graded_ones(name):
    """A unit with public perf cases shows their thresholds from the cases, not written by hand."""
    unit = units.load(name)
    perf = [case for case in unit.tests(hidden=False).CASES if case.kind == "perf"]
    with open(os.path.join(unit.folder, "lesson.md"), encoding="utf-8") as handle:
        lesson = handle.read()
    assert ("<!-- thresholds -->" in lesson) == bool(perf)
    assert not re.search(r"(full|no|zero) points at \d", lesson), "thresholds written by hand in lesson.md"
    if perf:
        text = generate.thresholds_text(unit)
        for case in perf:
            assert f"`{case.name}`" in text and f"{case.params['full_at']:g}×" in text


def test_an_instructor_notebook_keeps_the_outputs_of_a_run_while_its_cells_are_current():
    unit = units.load("day01_relu_bias")
    student, instructor = notebook_paths(unit)
    text = generated_files(unit)[instructor]
    notebook = nbformat.reads(text, as_version=4)
    code = next(cell for cell in notebook.cells if cell.cell_type == "code")
    code.outputs, code.execution_count = [nbformat.v4.new_output("stream", text="ran\n")], 1
    ran = nbformat.writes(notebook) + "\n"
    assert generate.is_current(instructor, ran, text, unit)
    assert not generate.is_current(student, ran.replace(instructor, student), generated_files(unit)[student], unit)
    code.source += "\n# edited"
    assert not generate.is_current(instructor, nbformat.writes(notebook) + "\n", text, unit)
