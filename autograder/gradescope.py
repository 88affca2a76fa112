"""A Gradescope autograder for one unit: immediate feedback on submit.

Gradescope's containers have no GPU, so on submit a student gets what a CPU can tell: the
build (with the compiler's errors in their own files) and the CPU-path cases; one
0-point entry says the CUDA cases run later on the course's GPUs (`grade-all`), whose
gradebook.csv is uploaded over this score.

    python -m autograder gradescope UNIT OUT.zip     write the autograder zip
    python -m autograder.gradescope --unit UNIT      what run_autograder calls

The zip is laid out as Gradescope wants it (its root holds setup.sh and run_autograder; it
is unpacked into /autograder/source) and is a copy of the project cut down to what grading
the unit reads (autograder/grader_files.py): pyproject.toml, course/, autograder/ and the
unit's solutions folders. setup.sh installs that copy (not editable) into a virtual
environment with torch and the CUDA compiler; run_autograder, which Gradescope copies to
/autograder/run_autograder, runs the installed grader on /autograder/submission and writes
/autograder/results/results.json. AUTOGRADER_ROOT moves /autograder and GRADER_VENV the
environment (tests use temporary folders).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
import zipfile

from autograder import grader_files, report
from autograder.collect import entry_point
from autograder.results import Grade, TestResult
from course.spec import answer_key, units
from course.spec.units import Unit
from course.written_whole import written_whole

NOTE = (
    "Immediate feedback from a machine without a GPU: the build and the CPU-path cases. The CUDA "
    "cases run later on the course's GPUs; that grade replaces this score."
)
GPU_ENTRY = "GPU cases: graded later"
# What `pip install` of the zip's copy reads beside the packages (pyproject.toml names README.md).
PROJECT_FILES = ("pyproject.toml", "README.md")
# The attacks on the grader (tests only), and what grading never reads: the answer key, the
# mutants and the lab's planted bugs stay off the machine students' code runs on.
_SKIP = ("hostile", "answers.md", "mutants.toml", "planted_bugs.toml")

_SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image: the system
# packages, then this folder's copy of the grader, installed (not editable) into $GRADER_VENV.
# torch {torch} for CUDA {cuda}: the toolkit compiles the .cu files (no GPU runs them here).
set -euxo pipefail
SOURCE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
VENV="${{GRADER_VENV:-/opt/grader}}"
PYTHON="${{GRADER_BASE_PYTHON:-python3}}"
if [ -z "${{SKIP_SYSTEM_PACKAGES:-}}" ]; then  # tests install only the grader
  export DEBIAN_FRONTEND=noninteractive
  . /etc/os-release  # Gradescope's Ubuntu 22.04 or 24.04 image
  apt-get update
  apt-get install -y --no-install-recommends python3 python3-pip python3-venv build-essential ninja-build \\
    bubblewrap ccache wget ca-certificates
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
fi
# GRADER_VENV_OPTIONS=--system-site-packages: an image whose Python already has this torch.
"$PYTHON" -m venv ${{GRADER_VENV_OPTIONS:-}} "$VENV"
# TORCH_INDEX_URL set but empty: pip's own configuration chooses where torch comes from.
INDEX="${{TORCH_INDEX_URL-https://download.pytorch.org/whl/cu{cuda_tag}}}"
"$VENV/bin/pip" install "torch=={torch}" ${{INDEX:+--index-url "$INDEX"}}
"$VENV/bin/pip" install "$SOURCE"
# This copy holds the unit's hidden suite and reference; the installed grader is what runs, and
# a uid sandbox is any other user (docs/security.md).
chmod o-rwx "$SOURCE"
"""

_RUN = """#!/usr/bin/env bash
# Gradescope runs this on every submission; it writes $ROOT/results/results.json.
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
VENV="${{GRADER_VENV:-/opt/grader}}"
# One compiler at a time: a build then needs the memory of its largest compile (docs/gradescope.md).
export MAX_JOBS=1 CUDA_HOME="${{CUDA_HOME:-/usr/local/cuda}}" TORCH_CUDA_ARCH_LIST="${{TORCH_CUDA_ARCH_LIST:-7.5}}"
# -P: the installed grader, never a folder of the same name where this runs.
cd "$ROOT" && exec "$VENV/bin/python" -P -m autograder.gradescope --unit {unit} \\
  --submission "$ROOT/submission" --results "$ROOT/results"
"""


def project_files(unit: Unit) -> list[tuple[str, str]]:
    """(name in the zip, path here) of the project copy the zip carries."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    missing = [name for name in PROJECT_FILES if not os.path.isfile(os.path.join(root, name))]
    if missing:
        raise FileNotFoundError(
            f"the Gradescope zip is made from a checkout of the course: no {', '.join(missing)} in {root}"
        )
    return [(name, os.path.join(root, name)) for name in PROJECT_FILES] + grader_files.files(unit, _SKIP)


def write_zip(unit: Unit, out: str) -> str:
    import torch

    version = torch.__version__.split("+")[0]
    cuda = torch.version.cuda or "12.8"
    scripts = {
        "setup.sh": _SETUP.format(
            torch=version, cuda=cuda, cuda_dash=cuda.replace(".", "-"), cuda_tag=cuda.replace(".", "")
        ),
        "run_autograder": _RUN.format(unit=unit.name),
    }
    copied = project_files(unit)
    with written_whole(out) as temporary, zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in scripts.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16  # executable once unpacked
            archive.writestr(info, text)
        for name, path in copied:
            archive.write(path, name)
        # The written answers' points without the key they come from (kept back, _SKIP).
        archive.writestr(f"solutions/{unit.name}/{answer_key.POINTS_FILE}", answer_key.points_json(unit))
    return out


def cases_on_submit(unit: Unit) -> tuple[str, ...]:
    """The cases graded on submit: every CPU case and every public one (those needing a GPU
    end in the one entry of `gpu_cases_later`)."""
    public = {case.name for case in unit.tests(hidden=False).CASES}
    return tuple(case.name for case in unit.tests(hidden=True).CASES if case.device == "cpu" or case.name in public)


def gpu_cases_later(result: Grade, unit: Unit) -> Grade:
    """`result` with the cases left unrun for want of a GPU as one 0-point entry that says
    where their grade comes from, rather than as failed tests."""
    on_gpu = {case.name for case in unit.tests(hidden=True).CASES if case.device != "cpu"}
    later = [test.name for test in result.tests if test.not_run and test.name in on_gpu]
    if later:
        note = (
            f"{len(later)} public cases need a GPU, which this machine does not have: "
            f"{', '.join(later)}. They run with the hidden ones on the course's GPUs, in the "
            "instructor's batch grading; that grade replaces this score."
        )
        result.tests = [test for test in result.tests if test.name not in later]
        result.tests.append(TestResult(GPU_ENTRY, 0, True, note, visibility="visible", tags=("gpu",)))
    return result


def feedback(unit: Unit, submission: str, **options) -> dict:
    """results.json's content for the submission (a folder as Gradescope leaves it)."""
    from autograder.grade import grade
    from autograder.grade_options import GradeOptions

    options = GradeOptions(has_gpu=False, tests=cases_on_submit(unit), **options)
    result = grade(entry_point(submission, unit), unit, options)
    data = report.results_json(gpu_cases_later(result, unit))
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
    parser = argparse.ArgumentParser(
        prog="python -m autograder.gradescope",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--unit", required=True, choices=[u.name for u in units.all_units()])
    parser.add_argument("--submission", required=True, help="the folder Gradescope put the upload in")
    parser.add_argument("--results", required=True, help="the folder results.json goes in")
    parser.add_argument("--time-limit", type=float, default=1200, help="seconds for the whole grading")
    args = parser.parse_args(argv)
    try:
        data = feedback(units.load(args.unit), args.submission, time_limit=args.time_limit)
    except Exception:
        traceback.print_exc()
        _write_json(
            {
                "score": 0,
                "output": "The grader failed on this submission; the course staff will "
                "look at it. Your grade comes from the GPU batch grading.",
                "tests": [],
            },
            args.results,
        )
        return 1
    print(f"wrote {_write_json(data, args.results)}: {data['score']} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
