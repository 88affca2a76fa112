"""The parts of a unit still to write, and which tests wait on them.

Every part a student writes announces itself while it is unwritten, with a line
"TODO(dayNN): file, function: what to write": a COURSE_TODO marker in C++ and CUDA
(solutions/common/course_todo.h), a `todo(kernel, "TODO(...)")` call beside a Triton kernel, a
`raise NotImplementedError("TODO(...)")` in Python, a quoted string in TOML and YAML (where the
file must still parse: pip then fails on the value, or a CI step echoes it). An op refuses to run while a function it runs
is unwritten, naming it.

A unit's public suite says, in one table, which of these functions each op runs on each path
(`FUNCTIONS_RUN`: {row: {"cpu" | "cuda" | "triton": ("file, function", ...)}}, a row being an op, or
an op and what cases pick within it: table_key); the public runner runs a case as soon as those
are written and otherwise reports the ones it waits on, without running it. The grader runs
every case: one whose function is unwritten fails with its op's refusal.
Forward before backward, CPU before CUDA: each test's own functions, never the whole unit's.
"""

from __future__ import annotations

import ast
import os
import re
from typing import NamedTuple

# A TODO line as messages and markers hold it: day, file, function (up to the next ": "), what.
_TODO_LINE = re.compile(r"TODO\((day\d+)\): ([^,\n]+), ((?:(?!: )[^\n])+): ?([^\n]*)")
# A COURSE_TODO line of C++ (not one quoted in a comment).
_COURSE_TODO = re.compile(r'^\s*COURSE_TODO(?:_CPU|_CUDA)?\("(day\d+): ?([^"]*)"', re.MULTILINE)
# A TODO of a configuration file: a quoted string (not one in a comment).
_QUOTED_TODO = re.compile(r'^[^#\n]*"(TODO\(day\d+\): [^"\n]*)"', re.MULTILINE)
CONFIG_FILES = (".toml", ".yml", ".yaml")


class Todo(NamedTuple):
    day: str  # "day09"
    file: str
    function: str
    what: str  # what to write there

    @property
    def where(self) -> str:
        """ "file, function": how a suite's FUNCTIONS_RUN table names it."""
        return f"{self.file}, {self.function}"

    @property
    def line(self) -> str:
        return f"TODO({self.day}): {self.file}, {self.function}: {self.what}".rstrip()


def parse(text: str) -> list[Todo]:
    """The TODO lines in `text` (an error message, a list), each function once, in order."""
    found: dict[tuple[str, str], Todo] = {}
    for day, file, function, what in _TODO_LINE.findall(text):
        todo = Todo(day, file.strip(), function.strip(), what.strip())
        found.setdefault((todo.file, todo.function), todo)
    return list(found.values())


def _python_todos(text: str) -> list[str]:
    """The "TODO(dayNN): ..." strings handed to a call in Python source: a
    `raise NotImplementedError(...)` or a Triton kernel's `todo(kernel, ...)`."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for argument in node.args:
                if isinstance(argument, ast.Constant) and str(argument.value).startswith("TODO("):
                    found.append((node.lineno, str(argument.value)))
    return [message for _, message in sorted(found)]


def todo_lines(name: str, text: str) -> list[str]:
    """The TODO lines of source file `name` holding `text`, in order."""
    if name.endswith(".py"):
        return _python_todos(text)
    if name.endswith(CONFIG_FILES):
        return _QUOTED_TODO.findall(text)
    return [f"TODO({day}): {what.strip()}" for day, what in _COURSE_TODO.findall(text)]


def remaining_todos(folder: str, files: list[str]) -> list[str]:
    """Every TODO line still in the unit's `files` (in `folder`), in the files' order."""
    found = []
    for name in files:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as handle:
                found += todo_lines(name, handle.read())
    return found


def unwritten(folder: str, files: list[str]) -> list[Todo]:
    """The functions still to write in the unit's `files`, each once, in the files' order."""
    return parse("\n".join(remaining_todos(folder, files)))


def case_path(case) -> str:
    """The path a case runs its op on: "triton", "cuda" or "cpu"."""
    if case.triton:
        return "triton"
    return "cuda" if case.device.startswith("cuda") else "cpu"


def table_key(spec, case) -> str:
    """A case's row of the FUNCTIONS_RUN table: its op (the suite's only one where the case names
    none, as course.ops.op_for calls it), and what the case picks within it where it names that:
    the op it checks ("opcheck rms_norm_quant"), the kernel version it runs ("forward vectorized").
    An error case reads the row's "errors" one where the table has it ("forward errors"): the
    checks an op makes before it runs anything still to write."""
    op = case.params.get("op") or (next(iter(spec.OPS)) if len(getattr(spec, "OPS", {})) == 1 else "")
    within = case.params.get("target") or case.params.get("kernel")
    row = f"{op} {within}" if within else op
    errors = f"{row} errors"
    return errors if case.kind == "error" and errors in getattr(spec, "FUNCTIONS_RUN", {}) else row


def functions_needed(spec, case) -> tuple[str, ...]:
    """The functions students write that `case` runs ("file, function"): its op's on its path,
    from the suite's FUNCTIONS_RUN table (nothing for a suite without one, or an op it leaves out)."""
    table = getattr(spec, "FUNCTIONS_RUN", {})
    return tuple(table.get(table_key(spec, case), {}).get(case_path(case), ()))


def waiting_on(needed: tuple[str, ...], todos: list[Todo]) -> list[Todo]:
    """The TODOs among `todos` of the functions in `needed`."""
    return [todo for todo in todos if todo.where in needed]


def needs_message(todos: list[Todo]) -> str:
    """What a test waits on, one function a line: "needs f (file): TODO(dayNN) still to write"."""
    return "\n".join(f"needs {todo.function} ({todo.file}): TODO({todo.day}) still to write" for todo in todos)


def refusal(message: str) -> str | None:
    """An op's refusal to run unwritten code (`message`, its error) as what the test needs;
    None for any other error."""
    todos = parse(message)
    return needs_message(todos) if todos else None
