"""Run-all of the generated notebooks in a fresh folder, as a student would in Colab."""

import os
import shutil

import pytest
import torch
from helpers import skip_without_gpu_if_gpu_only

from course.authoring.run_notebook import outputs_text, run
from course.sanitize import find_sanitizer
from course.spec import units

pytestmark = pytest.mark.notebook
UNITS = [u.name for u in units.all_units()]
NCU = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"


def profiled_metrics(text: str) -> dict[str, list[str]]:
    """{kernel: its metric lines} from a profiler cell's report ("name<template args>:" then metrics)."""
    kernels, current = {}, None
    for line in text.splitlines():
        if line.endswith(">:"):
            current = kernels.setdefault(line.split("<")[0], [])
        elif current is not None and line.strip().startswith(("dram__", "gpu__", "sm__", "launch__")):
            current.append(line)
    return kernels


@pytest.mark.parametrize("name", UNITS)
def test_student_notebook_stops_at_the_public_tests_with_todo_messages(name, tmp_path):
    """Or, where the unit's build files are the student's to write (a package's pyproject.toml
    and setup.py), at the build, with its first TODO."""
    unit = units.load(name)
    skip_without_gpu_if_gpu_only(unit)
    ok, notebook, error = run(os.path.join(units.REPO, "notebooks", f"{name}.ipynb"), str(tmp_path))
    text = outputs_text(notebook)
    if unit.build_files:
        assert not ok and "BuildFailed" in error and f"Built {name}" not in text, error[-2000:]
    else:
        assert not ok and "PublicTestsFailed" in error, error[-2000:]
        assert f"Built {name}" in text  # the starter code compiles as given
    assert f"TODO({unit.day})" in text


@pytest.mark.parametrize("name", UNITS)
def test_instructor_notebook_runs_to_the_end(name, tmp_path):
    skip_without_gpu_if_gpu_only(units.load(name))
    ok, notebook, error = run(os.path.join(units.REPO, "notebooks", "instructor", f"{name}.ipynb"), str(tmp_path))
    text = outputs_text(notebook)
    assert ok, error[-3000:]
    assert "public tests passed" in text and (tmp_path / f"submission_{name}.zip").exists()
    # A debugging lab's cells show each of the starter's bugs, planted in the solution, found
    # by its tool, where there is a GPU and compute-sanitizer to run them.
    bugs = units.load(name).planted_regions()
    if bugs and torch.cuda.is_available() and find_sanitizer():
        assert text.count(": found a bug") == len(bugs) and ": found nothing" not in text, text[-3000:]
    # What a notebook's profiler cell must print where a GPU and ncu ran it: every kernel it
    # launches (unit.toml's [notebook] profiled_kernels), each with its metrics.
    profiled = units.load(name).profiled_kernels
    if torch.cuda.is_available() and os.path.exists(NCU) and profiled:
        assert "ERR_NVGPUCTRPERM" not in text, "this machine does not let ncu read the GPU's counters"
        metrics = profiled_metrics(text)
        missing = [kernel for kernel in profiled if len(metrics.get(kernel, [])) < 6]  # six asked for
        assert not missing, f"the profiler cell printed no metrics for {missing}; it printed {metrics}"
