import pytest

from course.authoring import regions

SOURCE = """int f() {
  // BEGIN SOLUTION
  return 42;
  // STUB
  return 0;  // TODO(day00): the answer
  // END SOLUTION
}
"""


def test_solution_keeps_the_answer_and_drops_stubs_and_markers():
    text = regions.solution_text(SOURCE)
    assert "return 42;" in text and "TODO" not in text and "BEGIN" not in text


def test_template_has_the_stub_instead_of_the_answer():
    text = regions.template_text(SOURCE)
    assert "return 0;  // TODO(day00)" in text and "42" not in text and "STUB" not in text


def test_stubs_lists_each_region_stub():
    assert regions.stubs(SOURCE) == ["  return 0;  // TODO(day00): the answer\n"]


@pytest.mark.parametrize("broken, complaint", [
    ("// BEGIN SOLUTION\nx\n", "never closed"),
    ("// END SOLUTION\n", "unexpected 'END SOLUTION'"),
    ("// BEGIN SOLUTION\n// BEGIN SOLUTION\n", "unexpected 'BEGIN SOLUTION'"),
    ("// STUB\n", "unexpected 'STUB'"),
])
def test_malformed_regions_are_reported_with_their_line(broken, complaint):
    with pytest.raises(regions.RegionError, match=complaint):
        regions.template_text(broken, "f.cu")
