"""bench/layernorm_revisions.py builds each commit from that commit's own sources. Its builds and
timings need a GPU; which sources it writes is checked here."""

import os
import shutil
import subprocess

import pytest

from bench import layernorm_revisions as revisions
from course.spec import units

pytestmark = pytest.mark.day05


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", units.REPO, *args], capture_output=True, text=True, check=True).stdout


def _written(rev: str, folder) -> dict[str, str]:
    unit = revisions.sources_at(rev, str(folder))
    return {name: (folder / "src" / name).read_text() for name in unit.sources}


def test_a_commit_writes_its_own_sources(tmp_path):
    """Each file is that commit's, less its region markers and stubs; and an older commit, whose
    kernels differ from today's, writes other sources than the worktree does."""
    history = _git("log", "--format=%H", "-n", "40", "HEAD", "--", f"solutions/{revisions.UNIT}").split()
    rev = history[-1]
    written = _written(rev, tmp_path / "then")
    for name, text in written.items():
        committed = set(_git("show", f"{rev}:solutions/{revisions.UNIT}/{name}").splitlines())
        assert set(text.splitlines()) <= committed, name
    now = _written(revisions.WORKTREE, tmp_path / "now")
    paths = [f"solutions/{revisions.UNIT}/{name}" for name in now]
    changed = subprocess.run(["git", "-C", units.REPO, "diff", "--quiet", rev, "--", *paths])
    assert (written != now) == (changed.returncode != 0)


def test_the_worktree_writes_what_the_course_writes(tmp_path):
    assert _written(revisions.WORKTREE, tmp_path / "a") == _written_by_course(tmp_path / "b")


def _written_by_course(folder) -> dict[str, str]:
    unit = units.load(revisions.UNIT)
    unit.write("solution", str(folder))
    return {name: (folder / name).read_text() for name in unit.sources}


def test_a_folder_holding_solutions_writes_its_own_sources(tmp_path):
    """A variant: a copy of solutions/ with one kernel file changed builds from that copy."""
    copy = tmp_path / "variant"
    shutil.copytree(os.path.join(units.REPO, "solutions"), copy / "solutions")
    kernel = copy / "solutions" / revisions.UNIT / "layernorm_backward_fused.cu"
    kernel.write_text(kernel.read_text() + "// the variant's own line\n")
    written = _written(str(copy), tmp_path / "out")
    assert written["layernorm_backward_fused.cu"].endswith("// the variant's own line\n")
    assert written != _written(revisions.WORKTREE, tmp_path / "now")


def test_an_unknown_commit_is_named_in_the_error(tmp_path):
    with pytest.raises(SystemExit, match="no-such-commit"):
        revisions.sources_at("no-such-commit", str(tmp_path))
