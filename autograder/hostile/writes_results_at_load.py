# Hostile: an op left unwritten (every call raises its TODO), in a module that, at load, writes
# a right result for every case it can find in its test process's folder (each `.inputs.pt`
# beside its `.case.pt`, answered with torch's ops through the course's own harness) and for
# every index the grader used to name result files by, then exits before any case runs.
import os as _os
import sys as _sys
import types as _types

_child = _sys.modules["__main__"]


def relu_bias(x, bias):
    raise RuntimeError("TODO(day01): relu_bias.cpp, relu_bias_cpu: still to write")


def _forge_every_result():
    import json

    import torch

    from course.harness import execute
    from course.suites import import_suite

    with open("request.json") as handle:
        request = json.load(handle)
    spec = import_suite(request["solutions"], request["unit"], hidden=False)
    honest = _types.SimpleNamespace(relu_bias=lambda x, bias: torch.relu(x + bias))
    for name in _os.listdir("."):
        if name.endswith(".inputs.pt"):
            stem = name[: -len(".inputs.pt")]
            case = _child.case_from_data(torch.load(stem + ".case.pt", weights_only=False))
            result = execute(spec, honest, case, torch.load(name, weights_only=False))
            _child._save(result, stem + ".result.pt")
    for index in range(100):  # whatever can be written by a name known in advance
        if not _os.path.exists(f"{index}.result.pt"):
            _child._save({"exception": "forged"}, f"{index}.result.pt")
    _os._exit(0)


if hasattr(_child, "_save"):  # in the grader's test process
    _forge_every_result()
