"""The build helper's own contracts, beyond building units (tests/test_units.py)."""

import ctypes
import os
import shutil
import subprocess
import sys

import pytest

from autograder import precompiled_header
from course.build import build_progress, compile_extension, hint_for, libstdcxx_problem, package_build_error
from course.loading import _forget_loaded_module


def _state_dict():
    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    api.PyInterpreterState_GetDict.restype = ctypes.c_void_p
    api.PyInterpreterState_GetDict.argtypes = [ctypes.c_void_p]
    return ctypes.cast(api.PyInterpreterState_GetDict(api.PyInterpreterState_Get()), ctypes.py_object).value


def test_forgetting_a_module_keeps_the_interpreter_state_alive():
    """Each rebuild clears pybind11's module cache; doing so must not leak or drop
    references to the interpreter's state dict (dropping them crashed the process)."""
    state = _state_dict()
    before = sys.getrefcount(state)
    for _ in range(200):
        _forget_loaded_module("no_such_module")
    assert sys.getrefcount(state) == before


@pytest.mark.skipif(shutil.which("g++") is None or shutil.which("nm") is None, reason="needs g++ and nm")
def test_a_library_with_its_own_libstdcxx_is_named_with_the_fix(tmp_path, monkeypatch):
    (tmp_path / "prints.cpp").write_text("#include <iostream>\nvoid f() { std::cout << 1.5 << std::endl; }\n")
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    for flags, crashes in (([], False), (["-static-libstdc++"], True)):
        library = str(tmp_path / f"lib{len(flags)}.so")
        subprocess.run(["g++", "-shared", "-fPIC", *flags, str(tmp_path / "prints.cpp"), "-o", library], check=True)
        problem = libstdcxx_problem(library)
        assert bool(problem) == crashes, problem
    assert "LD_PRELOAD=$(g++ -print-file-name=libstdc++.so.6)" in problem
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/libstdc++.so.6")
    assert libstdcxx_problem(library) == ""


def test_a_mangled_build_record_is_a_failed_build_not_a_crash(tmp_path, monkeypatch):
    """A wheel's setup.py runs in the build child and can rewrite built.json: the grader must
    turn a bad one into a failed build."""
    from course import build

    (tmp_path / "src").mkdir()
    plan = build.Plan("toy", "none", "python", ("toy.py",))
    built = build.build_in_subprocess(plan, str(tmp_path / "src"), str(tmp_path / "build"), timeout=120)
    assert built == build.Built()
    (tmp_path / "build" / "built.json").write_text('{"library": 1')
    monkeypatch.setattr(build.subprocess, "Popen", _finished_process)
    with pytest.raises(build.BuildError, match="no readable built.json"):
        build.build_in_subprocess(plan, str(tmp_path / "src"), str(tmp_path / "build"), timeout=120)


class _finished_process:
    """A build child that exits at once with code 0 (leaving built.json as it was)."""

    def __init__(self, *args, **kwargs):
        self.returncode, self.pid = 0, 0

    def communicate(self, timeout=None):
        return b"", None


def test_a_package_build_shows_one_short_line_per_compile_step():
    """pip install -e echoes ninja's steps (pip indents them; torch's commands say -c twice)."""
    assert (
        build_progress("  [2/8] /usr/local/cuda/bin/nvcc -O3 -c /pkg/csrc/forward.cu -o f.o")
        == "[2/8] compiling forward.cu"
    )
    assert build_progress("  [1/8] c++ -MMD -c -c /pkg/csrc/ops.cpp -o /pkg/build/ops.o") == "[1/8] compiling ops.cpp"
    assert build_progress("[8/8] c++ a.o b.o -shared -o _C.so") == "[8/8] linking"
    assert build_progress("  ninja: no work to do.") == "nothing to recompile"
    assert build_progress("  running build_ext") == ""


def _with_precompiled_header(tmp_path):
    """(the precompiled headers' folder, made; includes(source, cpath): what g++ -H reports
    compiling source with a build's own options, those of its ninja file, and that CPATH)."""
    base = os.environ.get("COURSE_PRECOMPILED_HEADERS") or str(tmp_path / "headers")
    where = precompiled_header.folder(base)
    assert precompiled_header.make(where, wait=True)
    empty = tmp_path / "empty.cpp"
    empty.write_text("")
    compile_extension("flags_probe", [str(empty)], str(tmp_path / "build"))
    compiler, flags = precompiled_header._build_flags(str(tmp_path / "build"))

    def includes(source, cpath: str) -> str:
        env = {**os.environ, "CPATH": cpath, "CCACHE_DISABLE": "1"}
        run = subprocess.run(
            [*compiler, *flags, "-H", "-fsyntax-only", str(source)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        return run.stderr

    return where, includes


def test_build_errors_with_a_known_cause_name_the_fix():
    """The setup problems students meet, each answered with what to do; anything else points
    at the first error."""
    assert "pip install ninja" in hint_for("/bin/sh: 1: ninja: not found")
    assert "TORCH_CUDA_ARCH_LIST" in hint_for("nvcc fatal   : Unsupported gpu architecture 'compute_120'")
    assert "never defined" in hint_for("ImportError: ext.so: undefined symbol: _Z6launchv")
    assert hint_for("layernorm.cu(12): error: expected a ;").startswith("fix the first error first")


def test_a_package_build_stopped_by_a_todo_shows_the_todo_as_its_error():
    """pip quotes the value of pyproject.toml it refused; setup.py's traceback ends on the TODO
    it raised. Either way the TODO line is the error a student reads, without pip's quotes."""
    refused = (
        "error: invalid-pyproject-build-system-requires\n"
        "    It contains an invalid requirement: 'TODO(day07): pyproject.toml, [build-system]: requires x'\n"
    )
    error = package_build_error("pip wheel failed", refused)
    assert "TODOs still to write" in error.summary
    assert error.errors == ["TODO(day07): pyproject.toml, [build-system]: requires x"]
    raised = "      NotImplementedError: TODO(day07): setup.py, extension: return CUDAExtension(...)\n"
    assert package_build_error("pip wheel failed", raised).errors == [
        "TODO(day07): setup.py, extension: return CUDAExtension(...)"
    ]
    assert package_build_error("pip wheel failed", "src/a.cpp:3:1: error: x").errors == ["src/a.cpp:3:1: error: x"]


def test_cpp_compiles_use_the_precompiled_header_and_pass_over_a_broken_one(tmp_path):
    """A file compiled with a build's own options (its ninja file's) uses the precompiled ATen.h
    found through CPATH, and one that includes torch/extension.h first (day 01's) that one:
    g++ -H marks the header it used with "!". A file that is not a precompiled header is passed
    over, and the header itself read."""
    where, includes = _with_precompiled_header(tmp_path)
    source = tmp_path / "uses_aten.cpp"
    source.write_text(
        "// comments may come first, as in the units' files\n#include <ATen/ATen.h>\nint one() { return 1; }\n"
    )
    assert f"! {os.path.join(where, 'ATen', 'ATen.h.gch')}" in includes(source, where)
    day01_like = tmp_path / "uses_extension.cpp"
    day01_like.write_text("#include <torch/extension.h>\nint one() { return 1; }\n")
    assert f"! {os.path.join(where, 'torch', 'extension.h.gch')}" in includes(day01_like, where)
    broken = tmp_path / "broken"
    (broken / "ATen").mkdir(parents=True)
    (broken / "ATen" / "ATen.h.gch").write_bytes(os.urandom(4096))
    read = includes(source, str(broken)).splitlines()
    assert not any(line.startswith("! ") for line in read) and any(line.endswith("/ATen/ATen.h") for line in read)


def test_a_header_included_twice_builds_with_the_precompiled_one(tmp_path):
    """A file that includes ATen/ATen.h, then a header of its own that includes it again (as
    day07's and day09's autograd_node.h do), builds with the precompiled header on CPATH: g++
    can use a precompiled header only for the first include, and looks for the header itself in
    the folder where it found the unusable .gch."""
    where, includes = _with_precompiled_header(tmp_path)
    (tmp_path / "again.h").write_text("#pragma once\n#include <ATen/ATen.h>\ninline int two() { return 2; }\n")
    source = tmp_path / "twice.cpp"
    source.write_text('#include <ATen/ATen.h>\n#include "again.h"\nint three() { return 1 + two(); }\n')
    assert f"! {os.path.join(where, 'ATen', 'ATen.h.gch')}" in includes(source, where)


def test_no_folder_for_the_precompiled_header_means_builds_without_one(tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    assert precompiled_header.start(str(tmp_path / "a_file" / "headers")) == ("", None)
    assert "no precompiled header under" in capsys.readouterr().err
