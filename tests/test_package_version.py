"""day07's version pinning, on the reference's own wheel: setup.py records the torch it was built
against, and the installed package, told it was built against another torch, refuses to import
with an ImportError naming both versions, before its library loads. The session's build of the
reference (tests/helpers.py) is reused: no wheel is built here."""

import glob
import os
import shutil
import subprocess
import sys

import pytest
import torch
from helpers import built_unit

UNIT, PACKAGE = "day07_layernorm_package", "fast_layernorm"

pytestmark = pytest.mark.day07


def _major_minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def test_a_build_recorded_under_another_torch_refuses_to_import_naming_both(build_root, tmp_path):
    _, source_dir = built_unit(UNIT, "solution", build_root)
    # Where the reference's wheel was installed (a folder per build): not the package this process
    # imported last, which may be another test's build.
    prefixes = glob.glob(os.path.join(os.path.dirname(source_dir), "build", "prefix.*"))
    installed = os.path.join(max(prefixes, key=os.path.getmtime), PACKAGE)
    with open(os.path.join(installed, "_build_info.py")) as handle:
        assert f'TORCH_VERSION = "{torch.__version__}"' in handle.read()  # what setup.py recorded
    copy = tmp_path / PACKAGE
    shutil.copytree(installed, copy)
    major, minor = _major_minor(torch.__version__).split(".")
    other = f"{major}.{int(minor) + 1}.0"
    (copy / "_build_info.py").write_text(f'TORCH_VERSION = "{other}"\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, "-c", f"import {PACKAGE}"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    assert done.returncode == 1 and last.startswith("ImportError: "), done.stderr[-2000:]
    for named in (f"torch {_major_minor(torch.__version__)}", f"torch {_major_minor(other)}", "Rebuild"):
        assert named in last, last
