import pytest

from course.spec import regions

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


BUGGY = """int g(int n) {
  int total = 0;
  // BEGIN BUG stops_early
  for (int i = 0; i < n; ++i) total += i;
  // PLANTED
  for (int i = 0; i < n - 1; ++i) total += i;
  // END BUG
  return total;
}
"""


def test_a_planted_bug_is_in_the_template_and_fixed_in_the_solution():
    assert "i < n;" in regions.solution_text(BUGGY) and "n - 1" not in regions.solution_text(BUGGY)
    template = regions.template_text(BUGGY)
    assert "i < n - 1;" in template and "i < n;" not in template and "BUG" not in template
    assert regions.planted_bugs(BUGGY) == {
        "stops_early": (
            "  for (int i = 0; i < n; ++i) total += i;\n",
            "  for (int i = 0; i < n - 1; ++i) total += i;\n",
        )
    }
    assert regions.stubs(BUGGY) == [] and regions.solution_lines(BUGGY) == 0
    assert regions.bugged_text(BUGGY) == template  # no TODO here: the starter is the solution, bugged


@pytest.mark.parametrize(
    "broken, complaint",
    [
        ("// BEGIN SOLUTION\nx\n", "never closed"),
        ("// END SOLUTION\n", "unexpected 'END SOLUTION'"),
        ("// BEGIN SOLUTION\n// BEGIN SOLUTION\n", "unexpected 'BEGIN SOLUTION'"),
        ("// STUB\n", "unexpected 'STUB'"),
        ("// BEGIN BUG\nx\n// PLANTED\ny\n// END BUG\n", "names its bug"),
        ("// BEGIN BUG a\nx\n// END BUG\n", "unexpected 'END BUG'"),
        ("// BEGIN BUG a\nx\n// PLANTED\ny\n", "never closed"),
        ("// BEGIN SOLUTION a\nx\n// END SOLUTION\n", "only BEGIN BUG takes a name"),
    ],
)
def test_malformed_regions_are_reported_with_their_line(broken, complaint):
    for render in (regions.template_text, regions.planted_bugs):
        with pytest.raises(regions.RegionError, match=complaint):
            render(broken, "f.cu")


def test_a_bug_planted_twice_is_reported():
    twice = "// BEGIN BUG a\nx\n// PLANTED\ny\n// END BUG\n" * 2
    with pytest.raises(regions.RegionError, match="planted twice"):
        regions.planted_bugs(twice, "f.cu")


CONFIG = """[project]
# BEGIN SOLUTION
version = "0.1.0"
# STUB
#| version = "TODO(day00): pyproject.toml, [project]: the version"
# END SOLUTION
"""


def test_a_commented_stub_line_is_written_uncommented_in_the_template():
    """A file that tools read as authored (a pyproject.toml) cannot hold a key twice: its stub's
    lines are written `#| ...`, and the starter has them as plain lines."""
    import tomllib

    assert tomllib.loads(CONFIG) == {"project": {"version": "0.1.0"}}
    assert tomllib.loads(regions.template_text(CONFIG)) == {
        "project": {"version": "TODO(day00): pyproject.toml, [project]: the version"}
    }
    assert regions.solution_text(CONFIG) == '[project]\nversion = "0.1.0"\n'
