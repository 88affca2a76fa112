"""Build a unit's C++/CUDA sources into an importable module.

Shared by the notebooks (in-process, fast edit-rebuild loop) and the autograder
(in a child process, with a time limit).

Why not call `torch.utils.cpp_extension.load` twice in one process: the second
call renames the module to `name_v1`, which changes every compile command, so
ninja recompiles everything. Here the module name and flags never change; ninja
rebuilds only the edited files, and each build is imported from a fresh copy of
the library (the same path would return the module already loaded).
"""
from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

EXTRA_CFLAGS = ["-O3"]
EXTRA_CUDA_CFLAGS = ["-O3", "-lineinfo"]
LIB_EXT = ".so"


@dataclass
class BuildError(Exception):
    """A failed build, with the first compiler errors cut out of the log."""

    summary: str
    log: str = ""
    errors: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.summary + ("\n" + "\n".join(self.errors) if self.errors else "")


_ERROR_LINE = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+)(?::\d+)?[:(].*\berror\b", re.IGNORECASE)
_NVCC_ERROR_LINE = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+)\): error")


def first_errors(log: str, limit: int = 3, context: int = 2) -> list[str]:
    """The first `limit` compiler errors with file and line, each with a few lines after it."""
    lines = log.splitlines()
    found: list[str] = []
    for index, line in enumerate(lines):
        if _ERROR_LINE.match(line) or _NVCC_ERROR_LINE.match(line):
            found.append("\n".join(lines[index:index + 1 + context]).rstrip())
            if len(found) == limit:
                break
    if not found:  # a linker or ninja error: show the lines that say "error"
        found = [line for line in lines if "error" in line.lower()][:limit]
    return found


def hint_for(log: str) -> str:
    if "ninja" in log.lower() and "not found" in log.lower():
        return "ninja is missing: run `pip install ninja` and build again."
    if "unsupported gpu architecture" in log.lower():
        return "nvcc does not know this GPU: set TORCH_CUDA_ARCH_LIST to your GPU's capability (e.g. 7.5 on a T4)."
    if "undefined symbol" in log or "undefined reference" in log:
        return "a function is declared but never defined: check the launcher's name and template instantiations."
    return "fix the first error first: later ones are often caused by it."


def remove_stale_lock(build_dir: str) -> None:
    """A build killed mid-way (timeout, interrupted cell) can leave `lock` behind; older
    torch versions then wait on it forever. One builder owns a build directory."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(build_dir, "lock"))


def compile_extension(name: str, sources: list[str], build_dir: str, *, verbose: bool = False,
                      extra_include_paths: list[str] | None = None, extra_cuda_cflags: list[str] = ()) -> str:
    """Compile `sources` into build_dir/name.so with ninja and return its path (nothing is loaded).
    extra_cuda_cflags go after the course's own (tests: -D switches)."""
    from torch.utils import cpp_extension

    os.makedirs(build_dir, exist_ok=True)
    remove_stale_lock(build_dir)
    # Forget earlier builds of this name in this process: the name (and so every compile
    # command) stays the same, and ninja decides what to rebuild from file times.
    cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(name, None)
    importer = cpp_extension._import_module_from_library
    cpp_extension._import_module_from_library = lambda module_name, path, is_python_module: os.path.join(
        path, module_name + LIB_EXT)
    try:
        return cpp_extension.load(
            name=name,
            sources=[os.path.abspath(s) for s in sources],
            extra_cflags=EXTRA_CFLAGS,
            extra_cuda_cflags=EXTRA_CUDA_CFLAGS + list(extra_cuda_cflags),
            extra_include_paths=[os.path.abspath(p) for p in extra_include_paths or []],
            build_directory=os.path.abspath(build_dir),
            verbose=verbose,
            is_python_module=False,
        )
    except (RuntimeError, subprocess.CalledProcessError) as error:
        log = str(error) + "\n" + (getattr(error, "output", b"") or b"").decode(errors="replace")
        raise BuildError(f"build of {name} failed: {hint_for(log)}", log, first_errors(log)) from None
    finally:
        cpp_extension._import_module_from_library = importer


def _forget_loaded_module(name: str) -> None:
    """pybind11 3 keeps each module it has created, by name, in the interpreter's state dict
    and hands that one back to a later import of the same name, even from another library.
    Forget it, so the rebuilt library's module is the one created."""
    import ctypes

    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    # The dict is a borrowed reference: a py_object restype would make ctypes drop one
    # reference per call and eventually free the interpreter's state dict.
    api.PyInterpreterState_GetDict.restype = ctypes.c_void_p
    api.PyInterpreterState_GetDict.argtypes = [ctypes.c_void_p]
    address = api.PyInterpreterState_GetDict(api.PyInterpreterState_Get())
    state = ctypes.cast(address, ctypes.py_object).value if address else None
    cache = state.get("__pybind11_module_cache") if isinstance(state, dict) else None
    if isinstance(cache, dict):
        cache.pop(name, None)


def import_extension(name: str, library: str):
    """Import the library at `library` as module `name`, from a fresh copy so a rebuilt
    library is really loaded (the dynamic loader caches by path, pybind11 by name)."""
    loaded_dir = os.path.join(os.path.dirname(library), "loaded")
    os.makedirs(loaded_dir, exist_ok=True)
    copy = os.path.join(loaded_dir, f"{name}.{time.time_ns()}{LIB_EXT}")
    shutil.copyfile(library, copy)
    spec = importlib.util.spec_from_file_location(name, copy)
    _forget_loaded_module(name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for old in glob.glob(os.path.join(loaded_dir, f"{name}.*{LIB_EXT}")):
        if old != copy:
            with contextlib.suppress(OSError):
                os.remove(old)  # already mapped copies stay valid after unlink
    return module


def import_python_sources(name: str, extension, python_sources: list[str]):
    """Make the extension importable as `name`, then (re)load the unit's Python files in
    order, each able to `import <name>` and the files before it. Returns the last one."""
    sys.modules[name] = extension
    module = extension
    for path in python_sources:
        module_name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(module_name, os.path.abspath(path))
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return module


def split_sources(sources: list[str]) -> tuple[list[str], list[str]]:
    """(compiled .cpp/.cu files, Python files); headers are neither."""
    return ([s for s in sources if s.endswith((".cpp", ".cu"))], [s for s in sources if s.endswith(".py")])


def build_extension(name: str, sources: list[str], build_dir: str, *, verbose: bool = False,
                    extra_cuda_cflags: list[str] = ()):
    """Compile and import in this process. `sources` may include the unit's Python files:
    then the last of them is returned (it is the op's entry point). Returns (module, seconds)."""
    start = time.perf_counter()
    compiled, python = split_sources(sources)
    library = compile_extension(name, compiled, build_dir, verbose=verbose, extra_cuda_cflags=extra_cuda_cflags)
    module = import_python_sources(name, import_extension(name, library), python)
    return module, time.perf_counter() - start


def compile_in_subprocess(name: str, sources: list[str], build_dir: str, *, timeout: float,
                          env: dict | None = None) -> str:
    """Compile in a child process with a time limit (the autograder's way). Returns the library path."""
    command = [sys.executable, "-m", "course.build", name, build_dir, *map(os.path.abspath, sources)]
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    child_env = dict(env or os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, child_env.get("PYTHONPATH")]))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=child_env, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        remove_stale_lock(build_dir)
        raise BuildError(f"build of {name} took longer than {timeout:.0f} s and was stopped") from None
    log = output.decode(errors="replace")
    library = os.path.join(build_dir, name + LIB_EXT)
    if process.returncode != 0 or not os.path.exists(library):
        raise BuildError(f"build of {name} failed: {hint_for(log)}", log, first_errors(log))
    return library


def _kill_group(process: subprocess.Popen) -> None:
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


if __name__ == "__main__":  # python -m course.build NAME BUILD_DIR SOURCE...
    name, build_dir, *sources = sys.argv[1:]
    try:
        compile_extension(name, sources, build_dir, verbose=True)
    except BuildError as error:
        print(error.log)
        sys.exit(1)
