"""A Gradescope autograder for one unit: immediate feedback on submit.

Gradescope's containers have no GPU, so on submit a student gets what a CPU can tell: the
build (with the compiler's errors in their own files), the CPU-path cases and the public
cases (the CUDA ones reported as not run), and a note that the grade comes from the GPU
batch (`grade-all`), whose gradebook.csv is uploaded over this score.

    python -m autograder gradescope UNIT OUT.zip     write the autograder zip
    python -m autograder.gradescope --unit UNIT      what run_autograder calls

The zip holds setup.sh, run_autograder and source/: the grader (course/, autograder/) and
the solutions folders the unit reads (its own, common/ and those it is `[given]` files
from). Gradescope unpacks it into /autograder/source; AUTOGRADER_ROOT moves that root
(tests use a temporary folder).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
import zipfile

from autograder import report
from autograder.collect import entry_point
from autograder.written_whole import written_whole
from course.authoring import units
from course.authoring.units import REPO, Unit

NOTE = ("Immediate feedback from a machine without a GPU: the build, the CPU-path cases and the "
        "public cases. The CUDA cases run later on the course's GPUs; that grade replaces this score.")
_PACKAGES = ("course", "autograder")
# Bytecode, the attacks on the grader (tests only), and what grading never reads: the answer
# key, the mutants and the lab's planted bugs stay off the machine students' code runs on.
_SKIP = ("__pycache__", "hostile", "answers.md", "mutants.toml", "planted_bugs.toml")

_SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when the autograder image is built.
# torch {torch} for CUDA {cuda}: the toolkit compiles the .cu files (no GPU runs them here).
set -euxo pipefail
export DEBIAN_FRONTEND=noninteractive
. /etc/os-release  # Gradescope's Ubuntu 22.04 or 24.04 image
apt-get update
apt-get install -y --no-install-recommends python3 python3-pip python3-venv build-essential ninja-build \\
  bubblewrap ccache wget ca-certificates
PYTHON=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  # The grader needs Python 3.11 or later (tomllib); Ubuntu 22.04 has 3.10.
  apt-get install -y --no-install-recommends software-properties-common
  add-apt-repository -y ppa:deadsnakes/ppa && apt-get update
  apt-get install -y --no-install-recommends python3.11 python3.11-venv
  PYTHON=python3.11
fi
wget -q "https://developer.download.nvidia.com/compute/cuda/repos/${{ID}}${{VERSION_ID//./}}/x86_64/cuda-keyring_1.1-1_all.deb"
dpkg -i cuda-keyring_1.1-1_all.deb && apt-get update
apt-get install -y --no-install-recommends cuda-nvcc-{cuda_dash} cuda-cudart-dev-{cuda_dash} \\
  cuda-libraries-dev-{cuda_dash}
"$PYTHON" -m venv /opt/grader
/opt/grader/bin/pip install "torch=={torch}" --index-url https://download.pytorch.org/whl/cu{cuda_tag}
/opt/grader/bin/pip install ninja numpy "nbformat>=5.9" pyyaml
"""

_RUN = """#!/usr/bin/env bash
# Gradescope runs this on every submission; it writes $ROOT/results/results.json.
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{GRADING_PYTHON:-/opt/grader/bin/python}}"
export CUDA_HOME="${{CUDA_HOME:-/usr/local/cuda}}" TORCH_CUDA_ARCH_LIST="${{TORCH_CUDA_ARCH_LIST:-7.5}}"
cd "$ROOT/source" && exec "$PYTHON" -m autograder.gradescope --unit {unit} \\
  --submission "$ROOT/submission" --results "$ROOT/results"
"""


def source_folders(unit: Unit) -> list[str]:
    """Folders under the repository the grader needs for `unit`, relative to it."""
    given_from = sorted({origin for _, origin in unit.given})
    return [*_PACKAGES, "solutions/common", *(f"solutions/{name}" for name in [unit.name, *given_from])]


def write_zip(unit: Unit, out: str) -> str:
    import torch

    version = torch.__version__.split("+")[0]
    cuda = torch.version.cuda or "12.8"
    files = {"setup.sh": _SETUP.format(torch=version, cuda=cuda, cuda_dash=cuda.replace(".", "-"),
                                       cuda_tag=cuda.replace(".", "")),
             "run_autograder": _RUN.format(unit=unit.name)}
    with written_whole(out) as temporary, zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16  # executable once unpacked
            archive.writestr(info, text)
        for folder in source_folders(unit):
            for root, folders, names in os.walk(os.path.join(unit.repo, folder)):
                folders[:] = sorted(f for f in folders if f not in _SKIP)
                for name in sorted(names):
                    if not name.endswith(".pyc") and name not in _SKIP:
                        full = os.path.join(root, name)
                        archive.write(full, os.path.join("source", os.path.relpath(full, unit.repo)))
    return out


def cases_on_submit(unit: Unit) -> tuple[str, ...]:
    """The cases graded on submit: every CPU case and every public one."""
    public = {case.name for case in unit.tests(hidden=False).CASES}
    return tuple(case.name for case in unit.tests(hidden=True).CASES if case.device == "cpu" or case.name in public)


def feedback(unit: Unit, submission: str, **options) -> dict:
    """results.json's content for the submission (a folder as Gradescope leaves it)."""
    from autograder.grade import grade
    from autograder.grade_options import GradeOptions

    options = GradeOptions(has_gpu=False, tests=cases_on_submit(unit), **options)
    result = grade(entry_point(submission, unit), unit, options)
    data = report.results_json(result)
    data["output"] = NOTE + "\n\n" + data["output"]
    return data


def _write_json(data: dict, results_dir: str) -> str:
    os.makedirs(results_dir, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".results.", dir=results_dir)
    with os.fdopen(handle, "w") as file:
        json.dump(data, file, indent=2)
    path = os.path.join(results_dir, "results.json")
    os.replace(temporary, path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.gradescope", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--unit", required=True, choices=[u.name for u in units.all_units(REPO)])
    parser.add_argument("--submission", required=True, help="the folder Gradescope put the upload in")
    parser.add_argument("--results", required=True, help="the folder results.json goes in")
    parser.add_argument("--time-limit", type=float, default=1200, help="seconds for the whole grading")
    args = parser.parse_args(argv)
    try:
        data = feedback(units.load(args.unit), args.submission, time_limit=args.time_limit)
    except Exception:  # noqa: BLE001 - the student must see a report, and the staff why there is none
        traceback.print_exc()
        _write_json({"score": 0, "output": "The grader failed on this submission; the course staff will "
                     "look at it. Your grade comes from the GPU batch grading.", "tests": []}, args.results)
        return 1
    print(f"wrote {_write_json(data, args.results)}: {data['score']} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
