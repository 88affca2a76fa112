"""The child process: the only place student code runs.

    python -m autograder.child GROUP_DIR

GROUP_DIR/request.json says which suite to import and what to load; the runner then hands
over the cases one at a time (autograder/runner.py, GroupFiles). It imports the unit's public
suite, for the ops' calls: each case comes as data beside its inputs, and the hidden suite is
never imported here. With no build in the request, the child loads no student code: it times torch's own
op for perf cases, and the course's reference solution when the request names its build
(autograder/reference.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import types

import autograder.timed_kernels
from autograder.runner import CUDA_CONTEXT_LOST, GroupFiles, case_from_data
from autograder.timed_kernels import observed_run, profiled_case, profiled_run
from course.written_whole import written_whole


def _save(result: dict, path: str) -> None:
    import torch

    with written_whole(path) as temporary:  # the runner never sees half a file
        torch.save(result, temporary)


class _Pristine:
    """Modules of the grader's as they were before any student code ran in this process. That
    code may rebind their names (the timer's clock, the profiler's wrapper, the table of ops),
    rewrite a function in place (its `__code__`, its defaults) or a class's attributes; each
    case starts with all of them put back. What it changes in torch, or during a call, stays
    (docs/security.md)."""

    def __init__(self, modules: list):
        self.saved = [(vars(module), dict(vars(module))) for module in modules]
        self.tables = [
            (table, dict(table))
            for module in modules
            for table in [getattr(module, "OPS", None)]
            if isinstance(table, dict)
        ]
        classes = [value for module in modules for value in _defined_in(module) if isinstance(value, type)]
        self.classes = [(cls, dict(vars(cls))) for cls in classes]
        functions = {id(f): f for f in _functions(modules, classes)}.values()
        self.functions = [(f, f.__code__, f.__defaults__, f.__kwdefaults__) for f in functions]

    def restore(self) -> None:
        for namespace, names in self.saved:
            for added in set(namespace) - set(names):
                del namespace[added]
            namespace.update(names)
        for table, entries in self.tables:
            table.clear()
            table.update(entries)
        for cls, attributes in self.classes:
            for added in set(vars(cls)) - set(attributes):
                delattr(cls, added)
            for name, value in attributes.items():
                if vars(cls).get(name) is not value and name not in ("__dict__", "__weakref__"):
                    setattr(cls, name, value)
        for function, code, defaults, keyword_defaults in self.functions:
            function.__code__, function.__defaults__, function.__kwdefaults__ = code, defaults, keyword_defaults


def _defined_in(module) -> list:
    return [value for value in vars(module).values() if getattr(value, "__module__", None) == module.__name__]


def _functions(modules: list, classes: list):
    """The Python functions the modules' names reach, and their classes' methods."""
    for value in [v for module in modules for v in vars(module).values()] + [
        v for cls in classes for v in vars(cls).values()
    ]:
        value = getattr(value, "__func__", value)  # a staticmethod's or classmethod's function
        if isinstance(value, types.FunctionType):
            yield value


def _context_lost() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        return False
    except Exception:
        return True


def _observer_flush():
    """The observer's flush (autograder/observer/observer.cpp), bound before any student code
    loads; a no-op where no observer was injected."""
    import ctypes

    path = os.environ.get("CUDA_INJECTION64_PATH")
    if not path:
        return lambda: None
    try:
        return ctypes.CDLL(path).course_observer_flush
    except (OSError, AttributeError):
        return lambda: None  # the pipe then ends without a flush, and the grader says so


def main(folder: str) -> int:
    files = GroupFiles(folder)
    with open(files.request) as handle:
        request = json.load(handle)
    import torch

    from course.build import Built, Plan
    from course.harness import execute
    from course.loading import load
    from course.suites import import_suite

    spec = import_suite(request["solutions"], request["unit"], hidden=False)
    import course.bench
    import course.cases
    import course.harness
    import course.ops

    pristine = _Pristine([course.bench, course.cases, course.harness, course.ops, spec, autograder.timed_kernels])
    if request["device"].startswith("cuda"):
        torch.zeros(1, device=request["device"])  # create the context now, not inside the first case's time
    flush = _observer_flush()
    open(files.warm, "w").close()
    while not os.path.exists(files.go):  # no student code runs before: in a batch, the GPU's lock is held
        time.sleep(0.002)
    module = None  # the baseline run: torch's own ops, timed where no student code was loaded
    if request["built"] is not None:
        module = load(Plan.from_json(request["plan"]), Built(**request["built"]), request["source_dir"])
    reference = None
    if request.get("reference"):
        entry = request["reference"]
        reference = load(Plan.from_json(entry["plan"]), Built(**entry["built"]), entry["source_dir"])
    open(files.ready, "w").close()

    while (handed := files.take()) is not None:  # the runner hands over one case at a time
        pristine.restore()
        described = torch.load(handed.case, weights_only=False)
        markers = described.pop("observe", None)  # the observer's, for this case alone
        case = case_from_data(described)
        open(handed.started, "w").close()
        input_sets = torch.load(handed.inputs, weights_only=False)
        try:
            if markers is not None:  # under the observer: the perf case's profiled calls, watched
                result = observed_run(spec, module, profiled_case(case), input_sets[0], tuple(markers), flush)
            else:
                result = execute(spec, module, case, input_sets, reference)
                profiled = profiled_case(case)
                if profiled is not None and module is not None:
                    result["own_kernel"] = profiled_run(spec, module, profiled, input_sets[0])
                elif profiled is not None and reference is not None:
                    _profile_alike(spec, reference, profiled, input_sets[0])
        except Exception as error:
            lines = traceback.format_exception_only(type(error), error)
            result = {"exception": "".join(lines).strip()[:2000]}
            if case.device.startswith("cuda") and _context_lost():
                result["exception"] += (
                    "\n(this CUDA error leaves the GPU context unusable: a fresh process runs the next tests)"
                )
                _save(result, handed.result)
                return CUDA_CONTEXT_LOST
        _save(result, handed.result)
    return 0


def _profile_alike(spec, reference, profiled, inputs: dict) -> None:
    """The profiled call the student's process makes after each perf case, made with the
    reference here: the timings after it then follow the same history in both processes (a
    profiler's session can leave later calls slower). Its outcome is not wanted."""
    try:
        profiled_run(spec, reference, profiled, inputs)
    except Exception:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
