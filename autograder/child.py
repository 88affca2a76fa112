"""The child process: the only place student code runs.

    python -m autograder.child GROUP_DIR

GROUP_DIR/request.json says which library to load and which cases to run. The
child writes `ready` once the module is loaded, then for each case `<i>.started`
and `<i>.result.pt` (the harness's raw result; the parent judges it). With library
"", it loads no student code and times torch's own op for perf cases (the baseline).
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback

# Exit codes the parent reads.
CUDA_CONTEXT_LOST = 70


def _load_spec(path: str):
    spec = importlib.util.spec_from_file_location("unit_spec", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _save(result: dict, path: str) -> None:
    import torch

    torch.save(result, path + ".tmp")
    os.replace(path + ".tmp", path)  # the parent never sees half a file


def _context_lost() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001 - a sticky CUDA error: nothing more can run here
        return True


def main(group_dir: str) -> int:
    with open(os.path.join(group_dir, "request.json")) as handle:
        request = json.load(handle)
    import torch

    from course.build import import_extension, import_python_sources
    from course.harness import execute

    spec = _load_spec(request["spec"])
    cases = {case.name: case for case in spec.CASES}
    if request["device"] == "cuda":
        torch.zeros(1, device="cuda")  # create the context now, not inside the first case's time
    module = None  # the baseline run: torch's own ops, timed where no student code was loaded
    if request["library"]:
        module = import_python_sources(request["unit"], import_extension(request["unit"], request["library"]),
                                       request["python"])
    open(os.path.join(group_dir, "ready"), "w").close()

    for index, name in request["cases"]:
        case = cases[name]
        open(os.path.join(group_dir, f"{index}.started"), "w").close()
        input_sets = torch.load(os.path.join(group_dir, f"{index}.inputs.pt"), weights_only=False)
        try:
            result = execute(spec, module, case, input_sets)
        except Exception as error:  # noqa: BLE001 - the op failed on valid input: a verdict
            lines = traceback.format_exception_only(type(error), error)
            result = {"exception": "".join(lines).strip()[:2000]}
            if case.device == "cuda" and _context_lost():
                result["exception"] += "\n(this CUDA error leaves the GPU context unusable: a fresh process runs the next tests)"
                _save(result, os.path.join(group_dir, f"{index}.result.pt"))
                return CUDA_CONTEXT_LOST
        _save(result, os.path.join(group_dir, f"{index}.result.pt"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
