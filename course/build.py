"""Build a unit's files: JIT-compiled with ninja, a wheel from the student's package, or
nothing to build (Python and Triton). Loading what was built is course/loading.py's job.

Shared by the notebooks (in-process, fast edit-rebuild loop), the tests and the autograder
(in a child process with a time limit: `python -m course.build`).

Why not call `torch.utils.cpp_extension.load` twice in one process: the second call renames
the module to `name_v1`, which changes every compile command, so ninja recompiles
everything. Here the module name and flags never change, and ninja rebuilds only the edited
files.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

# -fno-gnu-unique: g++ makes some template statics (those of an optional Tensor argument)
# "unique" symbols, and a library defining one can never be unloaded: a rebuilt operator
# library could then not replace the old one in the same process.
EXTRA_CFLAGS = ["-O3", "-fno-gnu-unique"]
EXTRA_CUDA_CFLAGS = ["-O3", "-lineinfo"]
LIB_EXT = ".so"
BUILD_KINDS = ("jit", "wheel", "none")
LOAD_KINDS = ("pybind", "torch_ops", "python")


@dataclass(frozen=True)
class Plan:
    """How a unit's files become what its tests call (unit.toml says which kinds)."""

    name: str  # the unit: also the module name of a jit build
    build: str = "jit"  # jit: .cpp/.cu compiled with ninja; wheel: `pip wheel` of the
    # student's package; none: nothing to compile
    load: str = "pybind"  # pybind: the compiled module; torch_ops: torch.ops.<namespace>;
    # python: the Python files (or the package) alone
    files: tuple[str, ...] = ()  # the unit's files, in order; for a wheel, the package's
    namespace: str = ""  # torch_ops: the TORCH_LIBRARY namespace
    package: str = ""  # wheel: the import name of the package

    @property
    def compiled(self) -> list[str]:
        return [f for f in self.files if f.endswith((".cpp", ".cu"))] if self.build == "jit" else []

    @property
    def python(self) -> list[str]:
        """The Python files the loader imports, in order; the last is the entry point."""
        return [f for f in self.files if f.endswith(".py")] if self.build != "wheel" else []

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        data = json.loads(text)
        return cls(**{**data, "files": tuple(data["files"])})


@dataclass(frozen=True)
class Built:
    """What a build left behind: a jit library, or the folder a wheel was installed into."""

    library: str = ""
    prefix: str = ""


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
            found.append("\n".join(lines[index : index + 1 + context]).rstrip())
            if len(found) == limit:
                break
    if not found:  # a linker, ninja or packaging error: show the lines that say "error"
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


def compile_extension(
    name: str,
    sources: list[str],
    build_dir: str,
    *,
    verbose: bool = False,
    extra_include_paths: list[str] | None = None,
    extra_cuda_cflags: list[str] = (),
) -> str:
    """Compile `sources` into build_dir/name.so with ninja and return its path (nothing is loaded).
    extra_cuda_cflags go after the course's own (tests: -D switches)."""
    from torch.utils import cpp_extension

    os.makedirs(build_dir, exist_ok=True)
    remove_stale_lock(build_dir)
    # Forget earlier builds of this name in this process: the name (and so every compile
    # command) stays the same, and ninja decides what to rebuild from file times.
    cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(name, None)
    # load() has no public way to build without loading, and loading here would import a
    # pybind module under a cached name or register a TORCH_LIBRARY namespace for good:
    # course/loading.py loads, from a fresh copy of the library.
    importer = cpp_extension._import_module_from_library
    cpp_extension._import_module_from_library = lambda module_name, path, is_python_module: os.path.join(
        path, module_name + LIB_EXT
    )
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


# Defined by a library that carries its own copy of libstdc++: a g++ set up to link it
# statically does that to every extension. That copy is never initialized, and the
# extension's first number printed to a stream (a TORCH_CHECK message with a size in it)
# crashes the process. The shared libstdc++, preloaded, wins symbol lookup instead.
_STATIC_LIBSTDCXX_SYMBOL = "_ZNSt8ios_base4InitC1Ev"


def libstdcxx_problem(library: str) -> str:
    """'' unless `library` carries its own libstdc++ and the shared one is not preloaded: then
    what will crash and how to avoid it."""
    nm = shutil.which("nm")
    if nm is None or "libstdc++" in os.environ.get("LD_PRELOAD", ""):
        return ""
    symbols = subprocess.run([nm, "-D", "--defined-only", library], capture_output=True, text=True).stdout
    if _STATIC_LIBSTDCXX_SYMBOL not in symbols:
        return ""
    return (
        f"warning: {os.path.basename(library)} carries its own copy of libstdc++ (this g++ links it "
        "statically), which crashes on the first number an error message prints. Start Python with "
        "the shared one preloaded: export LD_PRELOAD=$(g++ -print-file-name=libstdc++.so.6)"
    )


def _pip(*args: str, verbose: bool) -> str:
    """Run pip offline in a child; return its output, or raise BuildError with its errors."""
    env = dict(os.environ, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=env)
    log = result.stdout + result.stderr
    if verbose:
        print(log)
    if result.returncode != 0:
        raise package_build_error(f"pip {args[0]} failed", log)
    return log


def package_build_error(what: str, log: str) -> BuildError:
    """A failed build of a package. Where its pyproject.toml or setup.py still holds a TODO (pip
    quotes the value it refused, setup.py's traceback the TODO it raised), the TODOs are its errors."""
    from course.todos import parse

    todos = [todo.line.rstrip("'\"") for todo in parse(log)]  # pip quotes the value it refused
    if todos:
        return BuildError(f"{what}: the package's build files hold TODOs still to write", log, todos)
    return BuildError(f"{what}: {hint_for(log)}", log, first_errors(log))


def build_wheel(package_dir: str, build_dir: str, *, verbose: bool = False) -> str:
    """Build the package in `package_dir` (its pyproject.toml or setup.py) into a wheel and
    install it into a fresh folder of its own; return that folder (put it on sys.path).
    No build isolation and no index: the build uses the torch already installed, offline."""
    dist = os.path.join(build_dir, "dist")
    shutil.rmtree(dist, ignore_errors=True)
    _pip(
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        dist,
        os.path.abspath(package_dir),
        verbose=verbose,
    )  # a path pip cannot take for a requirement name
    wheels = glob.glob(os.path.join(dist, "*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"pip wheel made {len(wheels)} wheels in {dist}, expected one")
    prefix = os.path.join(build_dir, f"prefix.{time.time_ns()}")  # a new folder per build: see loading.py
    _pip("install", "--no-deps", "--no-index", "--no-compile", "--target", prefix, wheels[0], verbose=verbose)
    return prefix


_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\] (.*)")


def build_progress(line: str) -> str:
    """A short progress line for one of ninja's steps in a build's output, '' for other lines:
    "[3/8] compiling layernorm_forward.cu" rather than the whole compiler command."""
    line = line.strip()  # pip indents its build's output
    step = _NINJA_STEP.match(line)
    if step is None:
        return "nothing to recompile" if line.startswith("ninja: no work to do") else ""
    source = re.search(r"\s-c\s+(?:-c\s+)?(\S+)", step.group(3))  # torch's commands say `-c -c file`
    what = f"compiling {os.path.basename(source.group(1))}" if source else "linking"
    return f"[{step.group(1)}/{step.group(2)}] {what}"


def install_editable(package_dir: str, *, echo=print) -> str:
    """`pip install --no-build-isolation -e package_dir`, offline: the compiled library lands
    in the package's own folder, beside its Python files. Echoes each compile step; returns
    the folder to import the package from. pip honours PIP_TARGET (the notebook tests install
    into a folder of their own instead of the environment's site-packages)."""
    env = dict(os.environ, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-v",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-e",
        os.path.abspath(package_dir),
    ]
    if env.get("PIP_TARGET"):
        command.append("--upgrade")  # a second install replaces the first in the target folder
    echo(f"pip install --no-build-isolation -e {package_dir}")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines = []
    for line in process.stdout:
        lines.append(line)
        progress = build_progress(line)
        if progress:
            echo(progress)
    if process.wait() != 0:
        raise package_build_error("pip install -e failed", "".join(lines))
    return os.path.abspath(package_dir)


@contextlib.contextmanager
def _compiler_cache_paths(source_dir: str, build_dir: str):
    """ccache, where the compiler runs through it, keys a compile by its paths: taken relative
    to the folder that holds both the sources and the build, the same files compile to one key
    wherever that folder lies (a grading's, a test's, autograder/compiler_cache.py's)."""
    saved = {name: os.environ.get(name) for name in ("CCACHE_BASEDIR", "CCACHE_NOHASHDIR")}
    os.environ["CCACHE_BASEDIR"] = os.path.commonpath([os.path.abspath(source_dir), os.path.abspath(build_dir)])
    os.environ["CCACHE_NOHASHDIR"] = "1"
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def build(
    plan: Plan, source_dir: str, build_dir: str, *, verbose: bool = False, extra_cuda_cflags: list[str] = ()
) -> Built:
    """Build the unit's files in source_dir, as its plan says, in this process."""
    with _compiler_cache_paths(source_dir, build_dir):
        return _build(plan, source_dir, build_dir, verbose, extra_cuda_cflags)


def _build(plan: Plan, source_dir: str, build_dir: str, verbose: bool, extra_cuda_cflags: list[str]) -> Built:
    if plan.build == "jit":
        sources = [os.path.join(source_dir, f) for f in plan.compiled]
        library = compile_extension(plan.name, sources, build_dir, verbose=verbose, extra_cuda_cflags=extra_cuda_cflags)
        problem = libstdcxx_problem(library)
        if problem:
            print(problem, file=sys.stderr)
        return Built(library=library)
    if plan.build == "wheel":
        return Built(prefix=build_wheel(source_dir, build_dir, verbose=verbose))
    return Built()


def build_args(plan: Plan, source_dir: str, build_dir: str) -> list[str]:
    """The arguments of `python` that build in a child process (`python -m course.build ...`)."""
    return ["-m", "course.build", plan.to_json(), os.path.abspath(source_dir), os.path.abspath(build_dir)]


def read_built(plan: Plan, build_dir: str, returncode: int, log: str) -> Built:
    """What the build child left in build_dir, or BuildError with its errors."""
    result = os.path.join(build_dir, "built.json")
    if returncode != 0 or not os.path.exists(result):
        if plan.build == "wheel":
            raise package_build_error(f"build of {plan.name} failed", log)
        raise BuildError(f"build of {plan.name} failed: {hint_for(log)}", log, first_errors(log))
    try:  # the build ran the student's setup.py, which could have written this file too
        with open(result) as handle:
            data = json.load(handle)
        return Built(**{key: str(data[key]) for key in ("library", "prefix")})
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise BuildError(f"build of {plan.name} left no readable built.json: {error}") from None


def build_in_subprocess(
    plan: Plan, source_dir: str, build_dir: str, *, timeout: float, env: dict | None = None
) -> Built:
    """Build in a child process with a time limit (the autograder builds in its sandbox instead)."""
    os.makedirs(build_dir, exist_ok=True)
    command = [sys.executable, *build_args(plan, source_dir, build_dir)]
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    child_env = dict(env or os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, child_env.get("PYTHONPATH")]))
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=child_env, start_new_session=True
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        remove_stale_lock(build_dir)
        raise BuildError(f"build of {plan.name} took longer than {timeout:.0f} s and was stopped") from None
    return read_built(plan, build_dir, process.returncode, output.decode(errors="replace"))


def kill_group(process: subprocess.Popen) -> None:
    """Kill a child started with start_new_session=True and everything it started."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


if __name__ == "__main__":  # python -m course.build PLAN_JSON SOURCE_DIR BUILD_DIR
    plan_json, source_dir, build_dir = sys.argv[1:]
    try:
        built = build(Plan.from_json(plan_json), source_dir, build_dir, verbose=True)
    except BuildError as error:
        print(error.log or error.summary)
        sys.exit(1)
    with open(os.path.join(build_dir, "built.json"), "w") as handle:
        json.dump(asdict(built), handle)
