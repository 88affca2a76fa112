"""A package as its users meet it: imported in a new Python process (that under another torch,
too) and its CI workflow, read, never run. Each check returns what is wrong, '' when nothing is.
The notebook runs the new Python from its own process (import_fresh); the grader runs it itself
(autograder/parent_checks.py) and judges its output with the same functions."""
import importlib
import json
import os
import re
import subprocess
import sys

from course.ops import NewPython

FRESH_TIMEOUT = 90  # seconds for a new Python to import torch and the package
WORKFLOW_BYTES = 64 << 10  # a workflow is a page or two: more is not one

# Run in the new process: import the package, under `torch.__version__` set to `other` where
# given, and say what happened as one JSON line.
IMPORT_SCRIPT = """
import json, sys, torch
from torch.torch_version import TorchVersion
if sys.argv[2]:
    torch.__version__ = TorchVersion(sys.argv[2])
try:
    module = __import__(sys.argv[1])
except Exception as error:
    print(json.dumps({"raised": type(error).__name__, "message": str(error)[:2000],
                      "import_error": isinstance(error, ImportError)}))
else:
    print(json.dumps({"raised": "", "file": module.__file__}))
"""


def installed_folder(package: str) -> str:
    """The folder this process imported `package` from: the one to put on a new process's path."""
    module = importlib.import_module(package)
    return os.path.dirname(os.path.dirname(os.path.abspath(module.__file__)))


def import_fresh(package: str, other_torch: str = "") -> tuple[dict, str]:
    """({"raised": exception's class name or "", ...}, the process's stderr) of importing
    `package` in a new Python process, from where this one imported it; with `other_torch`,
    torch says it is that version. A process that died without a word raises AssertionError."""
    folder = installed_folder(package)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [folder, os.environ.get("PYTHONPATH")])))
    try:
        done = subprocess.run([sys.executable, "-c", IMPORT_SCRIPT, package, other_torch], capture_output=True,
                              text=True, env=env, cwd=folder, timeout=FRESH_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"importing {package} in a new Python took over {FRESH_TIMEOUT} s") from None
    return read_import(package, done.returncode, done.stdout, done.stderr), done.stderr


def read_import(package: str, code: int | None, stdout: str, stderr: str) -> dict:
    """The new Python's outcome from its exit code and output; AssertionError where it left none."""
    lines = stdout.strip().splitlines()
    if code != 0 or not lines:
        raise AssertionError(f"importing {package} in a new Python ended with exit code {code} "
                             f"(a crash, not an exception):\n{stderr[-1500:]}")
    try:
        outcome = json.loads(lines[-1])
    except ValueError:
        outcome = None
    if not isinstance(outcome, dict) or not isinstance(outcome.get("raised"), str):
        raise AssertionError(f"importing {package} in a new Python printed something else last: {lines[-1][:300]}")
    return outcome


def fresh_import_problem(package: str, outcome: dict) -> str:
    """'' if `import package` went through in a new Python; else what it raised."""
    if outcome["raised"]:
        return f"`import {package}` in a new Python raised {outcome['raised']}: {str(outcome.get('message'))[:2000]}"
    return ""


def major_minor(version: str) -> str:
    """'2.5' of '2.5.1+cu124'."""
    return ".".join(str(version).split("+")[0].split(".")[:2])


def another_torch(version: str) -> str:
    """A torch version of another minor release than `version`: the next one."""
    major, minor = major_minor(version).split(".")
    return f"{major}.{int(minor) + 1}.0"


def _names_version(message: str, version: str) -> bool:
    return re.search(rf"(?<![\d.]){re.escape(major_minor(version))}(?![\d])", message) is not None


def other_torch_problem(package: str) -> str:
    """'' if importing `package` where torch says it is another minor release than the one
    running raises ImportError naming both versions and saying to rebuild; else what happened."""
    running = str(__import__("torch").__version__)
    outcome, stderr = import_fresh(package, another_torch(running))
    return other_torch_outcome_problem(package, running, outcome, stderr)


def other_torch_outcome_problem(package: str, running: str, outcome: dict, stderr: str) -> str:
    """other_torch_problem's verdict on the new Python's outcome, the package built against `running`."""
    other = another_torch(running)
    if not outcome["raised"]:
        todo = [line.strip() for line in stderr.splitlines() if "TODO(" in line]
        return (f"under torch {other} (built against {running}), `import {package}` went ahead: the compiled "
                "library would fail to load, or misbehave" + ("\n" + "\n".join(todo[:1]) if todo else ""))
    message = str(outcome.get("message"))
    if not outcome.get("import_error"):
        return f"under torch {other}, `import {package}` raised {outcome['raised']}, not ImportError: {message[:300]}"
    missing = [f"torch {major_minor(v)}" for v in (running, other) if not _names_version(message, v)]
    missing += ["what to do (rebuild)"] if "rebuild" not in message.lower() else []
    if missing:
        return f"under torch {other}, the ImportError does not name {', '.join(missing)}: {message[:300]}"
    return ""


def fresh_import_check(package: str, other_torch: bool = False) -> NewPython:
    """The grader's own run of the new Python (course.ops.NewPython), judged as the notebook's is:
    a plain import, or with `other_torch` one where torch says it is the next minor release."""
    running = str(__import__("torch").__version__)

    def problem(code: int | None, stdout: str, stderr: str) -> str:
        outcome = read_import(package, code, stdout, stderr)
        if other_torch:
            return other_torch_outcome_problem(package, running, outcome, stderr)
        return fresh_import_problem(package, outcome)

    return NewPython(("-c", IMPORT_SCRIPT, package, another_torch(running) if other_torch else ""), problem)


def _todo_lines(text: str) -> list[str]:
    return re.findall(r"TODO\(day\d+\): [^\"\n]*", text)


def _runs(job: dict) -> list[str]:
    """The shell commands of a job's steps, one string a step ('' for a step that uses an action)."""
    steps = job.get("steps") if isinstance(job.get("steps"), list) else []
    return [str(step.get("run", "")) if isinstance(step, dict) else "" for step in steps]


_BUILDS_WHEEL = re.compile(r"\bpip3?\s+wheel\b|-m\s+pip\s+wheel\b|-m\s+build\b")
_RUNS_TESTS = re.compile(r"\bpytest\b")


def _builds_then_tests(job) -> bool:
    """Whether a step of `job` builds a wheel and a later one runs pytest."""
    if not isinstance(job, dict) or "runs-on" not in job:
        return False
    runs = _runs(job)
    built = [i for i, run in enumerate(runs) if _BUILDS_WHEEL.search(run)]
    return bool(built) and any(_RUNS_TESTS.search(run) for run in runs[built[0]:])


def workflow_problem(path: str) -> str:
    """'' if the GitHub Actions workflow at `path` parses as YAML, runs on some event, and has a
    job (with runs-on) one of whose steps builds a wheel (pip wheel, python -m build) and a later
    one runs pytest; else what is wrong. What the commands do is not checked: nothing runs them."""
    if not os.path.isfile(path):
        return f"no workflow file at {path}"
    with open(path, "rb") as handle:
        text = handle.read(WORKFLOW_BYTES + 1).decode("utf-8", errors="replace")
    if len(text) > WORKFLOW_BYTES:
        return f"the workflow is over {WORKFLOW_BYTES >> 10} KiB"
    todos = _todo_lines(text)
    if todos:
        return "the workflow still holds its TODOs:\n" + "\n".join(todos)
    import yaml  # PyYAML: Colab and the grader have it

    try:
        workflow = yaml.safe_load(text)
    except yaml.YAMLError as error:
        return f"the workflow is not valid YAML: {str(error)[:400]}"
    if not isinstance(workflow, dict):
        return "the workflow is not a YAML mapping (name:, on:, jobs:)"
    if "on" not in workflow and True not in workflow:  # YAML 1.1 reads a bare `on` as true
        return "the workflow has no `on:`: no event starts it"
    jobs = workflow.get("jobs")
    if not isinstance(jobs, dict) or not jobs:
        return "the workflow has no jobs"
    if not any(_builds_then_tests(job) for job in jobs.values()):
        return ("no job (with runs-on) has a step that builds the wheel (pip wheel or python -m build) and a later "
                "step that runs the package's tests (pytest)")
    return ""
