"""What a course notebook calls: set-up checks, the source-cell magic, build, tests, submit.

Everything here runs inside the student's notebook (Colab or Jupyter).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

BUILD_ROOT = "build"
SOURCE_MAGIC = "%%writefile_if_changed"  # the cell magic that writes a source file


class SetupProblem(RuntimeError):
    pass


def _cuda_major_of_nvcc() -> tuple[str, str] | None:
    from torch.utils import cpp_extension

    nvcc = os.path.join(cpp_extension.CUDA_HOME or "", "bin", "nvcc")
    if not os.path.exists(nvcc):
        nvcc = shutil.which("nvcc")
    if not nvcc:
        return None
    output = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    match = re.search(r"release (\d+)\.(\d+)", output)
    return (match.group(1), f"{match.group(1)}.{match.group(2)}") if match else None


def setup(require_gpu: bool = True) -> None:
    """Check the runtime, set TORCH_CUDA_ARCH_LIST, register %%writefile_if_changed, print versions."""
    import torch

    if not torch.cuda.is_available():
        message = (
            "No GPU. In Colab: Runtime > Change runtime type > T4 GPU, then run all cells again. "
            "The CPU parts of this unit still build and run without one."
        )
        if require_gpu:
            print("WARNING:", message)
    else:
        major, minor = torch.cuda.get_device_capability()
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")
    if shutil.which("ninja") is None:
        print("ninja is missing; installing it (pip install ninja) ...")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "ninja"], check=True)
        os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    nvcc = _cuda_major_of_nvcc()
    if torch.version.cuda and nvcc is None:
        print(
            "WARNING: nvcc not found: CUDA sources cannot be compiled. Install the CUDA toolkit "
            f"{torch.version.cuda} or set CUDA_HOME to it."
        )
    elif torch.version.cuda and nvcc[0] != torch.version.cuda.split(".")[0]:
        raise SetupProblem(
            f"nvcc is CUDA {nvcc[1]} but this torch was built with CUDA {torch.version.cuda}; their major "
            "versions must match. Install the torch wheel for your nvcc (pip install torch --index-url "
            f"https://download.pytorch.org/whl/cu{nvcc[1].replace('.', '')}) and restart the runtime, "
            "or point CUDA_HOME to a CUDA toolkit of the torch's version."
        )
    _register_magic()
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    print(
        f"torch {torch.__version__} (CUDA {torch.version.cuda}), nvcc {nvcc[1] if nvcc else 'missing'}, "
        f"GPU: {gpu}, TORCH_CUDA_ARCH_LIST={os.environ.get('TORCH_CUDA_ARCH_LIST', 'unset')}, "
        f"Python {sys.version.split()[0]}"
    )


def write_if_changed(path: str, text: str) -> bool:
    """Write `text` to `path` unless it already holds it: an untouched file keeps its
    time stamp, so ninja does not rebuild it. Returns whether the file was written."""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return False
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def _writefile_if_changed(line: str, cell: str) -> None:
    path = line.strip()
    print(("Wrote " if write_if_changed(path, cell) else "Unchanged: ") + path)


def _register_magic() -> None:
    try:
        ip = get_ipython()
    except NameError:
        return
    ip.register_magic_function(_writefile_if_changed, magic_kind="cell", magic_name=SOURCE_MAGIC.lstrip("%"))


class BuildFailed(RuntimeError):
    pass


def build_unit(
    unit: str, files: list[str], build: str = "jit", load: str = "pybind", namespace: str = "", package: str = ""
):
    """Build the unit's files (in the folder named after the unit) and return what its tests
    call; run again after an edit, it rebuilds what changed and loads the new code."""
    from course.build import BuildError, Plan
    from course.loading import build_and_load

    plan = Plan(unit, build, load, tuple(files), namespace, package)
    try:
        module, seconds = build_and_load(plan, unit, os.path.join(BUILD_ROOT, unit), editable=True)
    except BuildError as error:
        print(error.summary)
        for entry in error.errors:
            print(entry)
        raise BuildFailed("the build failed: see the first errors above") from None
    print(f"Built {unit} in {seconds:.1f} s")
    return module


class PublicTestsFailed(AssertionError):
    pass


def run_public_tests(unit: str, module, files: list[str] = (), seed: int | None = None) -> None:
    """The unit's public cases against `module`, after the list of TODOs left in its `files`
    (in the folder the notebook writes them to); a case waiting on one of them is not run."""
    from course.public import print_todos, run_cases
    from course.suites import import_suite, public_root
    from course.todos import unwritten

    print_todos(unit, list(files))
    spec = import_suite(public_root(), unit, hidden=False)
    if not run_cases(spec, module, seed=seed, todos=unwritten(unit, list(files))):
        raise PublicTestsFailed("some public tests failed or wait on functions still to write: read the messages above")


def _current_notebook() -> dict | None:
    """The notebook's own JSON, where the front end can hand it over (Colab)."""
    try:
        from google.colab import _message  # type: ignore

        return _message.blocking_request("get_ipynb", request="", timeout_sec=30)["ipynb"]
    except Exception:
        return None


def _saved_notebook(unit: str, named: str = "") -> str | None:
    """The path of the notebook file this kernel runs, outside Colab: `named`, else the one the
    front end names (JupyterLab and Notebook set `__session__`, VS Code `__vsc_ipynb_file__`),
    else the one notebook of the unit in the working folder."""
    import __main__

    candidates = [named] if named else []
    candidates += [getattr(__main__, name, "") for name in ("__session__", "__vsc_ipynb_file__")]
    candidates.append(os.environ.get("JPY_SESSION_NAME", ""))
    for path in candidates:
        if isinstance(path, str) and path.endswith(".ipynb") and os.path.isfile(path):
            return path
    if named:
        raise FileNotFoundError(f"notebook: no notebook file at {named!r}")
    here = [name for name in sorted(os.listdir(".")) if name.endswith(".ipynb") and unit in name]
    return here[0] if len(here) == 1 else None


def _notebook_for_submission(unit: str, named: str) -> tuple[bytes | None, str]:
    """The notebook's JSON to hand in, and where it came from: Colab's front end, or the file."""
    if not named:
        notebook = _current_notebook()
        if notebook is not None:
            return json.dumps(notebook).encode(), "notebook"
    path = _saved_notebook(unit, named)
    if path is None:
        return None, ""
    with open(path, "rb") as handle:
        return handle.read(), f"notebook {os.path.basename(path)} as last saved"


def submit(unit: str, files: list[str], student: str = "", notebook: str = "") -> str:
    """Pack the unit's sources, a manifest naming `student` and the notebook (with the written
    answers) into a zip to hand in. In Colab the notebook comes from the front end; elsewhere
    from its file (`notebook`, else the one this kernel runs), as last saved."""
    out = f"submission_{unit}.zip"
    student = str(student).strip()
    manifest = {"unit": unit, "student": student, "created": time.strftime("%Y-%m-%d %H:%M:%S"), "files": {}}
    data, source = _notebook_for_submission(unit, notebook)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in files:
            with open(os.path.join(unit, name), "rb") as handle:
                content = handle.read()
            archive.writestr(f"{unit}/{name}", content)
            manifest["files"][name] = hashlib.sha256(content).hexdigest()
        if data is not None:
            archive.writestr(f"{unit}.ipynb", data)
        archive.writestr("manifest.json", json.dumps(manifest, indent=2))
    print(f"Wrote {out} ({len(files)} sources{', ' + source if source else ''}). Hand in this file.")
    if source.endswith("as last saved"):
        print("Save the notebook (Ctrl+S) and run this cell again if you changed an answer since.")
    if data is None:
        print(
            "WARNING: your written answers are NOT in this zip: no notebook file was found. Save the "
            f"notebook and pass its path, submit(..., notebook='{unit}.ipynb'), or hand in the .ipynb too."
        )
    if not student:
        print("WARNING: no STUDENT set above: the grader will know this zip only by the name you upload it under.")
    try:
        from google.colab import files as colab_files  # type: ignore

        colab_files.download(out)
    except ImportError:
        pass
    return out
