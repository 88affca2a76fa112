"""The shared compiler cache's only writers: the course's own reference and template, built
as a grading builds them (autograder/compiler_cache.py)."""

import os

from autograder import compiler_cache
from course.build import BuildError
from course.spec import units

UNIT = "day02_layernorm_forward"


def test_the_template_and_where_asked_the_reference_are_built_beside_their_build_folders(tmp_path, monkeypatch):
    built = []

    def fake_build(plan, source_dir, build_dir, **options):
        with open(os.path.join(source_dir, "layernorm_forward.cu"), encoding="utf-8") as handle:
            built.append((os.path.dirname(source_dir) == os.path.dirname(build_dir), handle.read(), options["env"]))
        if len(built) == 2:
            raise BuildError("build of the template failed: an error", "log", [])

    monkeypatch.setattr(compiler_cache, "build_in_subprocess", fake_build)
    env = {"CCACHE_DIR": str(tmp_path / "cache")}
    kinds = (compiler_cache.SOLUTION, compiler_cache.TEMPLATE)
    problems = compiler_cache.warm(units.load(UNIT), env, str(tmp_path), kinds=kinds)
    assert [beside for beside, _, _ in built] == [True, True] and all(e is env for _, _, e in built)
    solution, template = built[0][1], built[1][1]
    assert "COURSE_TODO" not in solution and "COURSE_TODO" in template
    assert problems == [f"{UNIT} template: build of the template failed: an error"]
    assert os.listdir(tmp_path) == []  # its scratch folders are gone


def test_without_a_shared_cache_nothing_is_built(monkeypatch, capsys):
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    monkeypatch.setattr(compiler_cache, "warm", lambda *args: (_ for _ in ()).throw(AssertionError("built")))
    assert compiler_cache.main([UNIT]) == 0 and compiler_cache.start("/dev/null") is None
    assert "nothing to warm" in capsys.readouterr().err
    assert not compiler_cache.enabled({"CCACHE_DIR": "/c", "CCACHE_DISABLE": "1"})


def test_a_class_grading_never_puts_the_references_objects_in_the_cache(tmp_path, monkeypatch):
    """Every submission's build reads the cache: the reference's objects there would be a
    solution any build could link."""
    built = []
    monkeypatch.setattr(
        compiler_cache, "build_in_subprocess", lambda plan, source_dir, *a, **k: built.append(source_dir)
    )
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "cache"))
    assert compiler_cache.warm(units.load(UNIT), {}, str(tmp_path)) == [] and len(built) == 1
    compiler_cache.main([UNIT])
    assert len(built) == 2  # the template alone, again
    compiler_cache.main(["--with-solutions", UNIT])
    assert len(built) == 4
