"""A virtual environment that holds only what a test installs into it, and the environment
to run it in: none of the developer's interpreter, editable install or PYTHONPATH."""

import os
import subprocess
import sys

# What would let a run find this checkout's packages rather than the ones installed.
_LEAKS = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PYTHONUSERBASE")


def base_python() -> str:
    """The interpreter this one was made from (a venv's base, else itself)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def create(folder: str, system_site_packages: bool = False) -> str:
    """A new venv in `folder`; its python."""
    command = [base_python(), "-m", "venv", *(["--system-site-packages"] * system_site_packages), folder]
    subprocess.run(command, check=True, capture_output=True)
    return os.path.join(folder, "bin", "python")


def env(venv: str | None = None, **extra: str) -> dict:
    """os.environ without what points at this checkout; `venv`'s bin first on PATH."""
    clean = {k: v for k, v in os.environ.items() if k not in _LEAKS}
    if venv:
        clean["PATH"] = os.path.join(venv, "bin") + os.pathsep + clean.get("PATH", "")
    return {**clean, **extra}


def where_installed(python: str, package: str, cwd: str, environment: dict) -> str:
    """The folder `package` is imported from by `python`, run in `cwd`."""
    script = f"import os, {package}; print(os.path.dirname({package}.__file__))"
    return subprocess.run(
        [python, "-c", script], cwd=cwd, env=environment, capture_output=True, text=True, check=True
    ).stdout.strip()
