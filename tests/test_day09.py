"""day09's Triton kernels where there is no GPU: run in Triton's interpreter against float64."""
import os
import subprocess
import sys

import pytest

from course.authoring import units

HERE = os.path.dirname(os.path.abspath(__file__))


def test_reference_triton_kernels_match_float64_in_the_interpreter(tmp_path):
    pytest.importorskip("triton")
    units.load("day09_rmsnorm_int8").write("solution", str(tmp_path))
    env = dict(os.environ, TRITON_INTERPRET="1")
    result = subprocess.run([sys.executable, os.path.join(HERE, "day09_interpreted_kernels.py"), str(tmp_path)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "ok    quant ties" in result.stdout


def test_interpreted_check_catches_round_half_away_from_zero(tmp_path):
    """The check can fail: with roundf's rule in place of rint's, the tie rows come out wrong."""
    pytest.importorskip("triton")
    units.load("day09_rmsnorm_int8").write("solution", str(tmp_path))
    kernel = tmp_path / "rmsnorm_triton.py"
    text = kernel.read_text()
    rounded = "tl.where(y / scale >= 0, tl.floor(y / scale + 0.5), -tl.floor(-y / scale + 0.5))"
    kernel.write_text(text.replace("libdevice.rint(tl.div_rn(y, tl.where(scale == 0.0, 1.0, scale)))", rounded, 1))
    assert kernel.read_text() != text
    env = dict(os.environ, TRITON_INTERPRET="1")
    result = subprocess.run([sys.executable, os.path.join(HERE, "day09_interpreted_kernels.py"), str(tmp_path)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode != 0 and "WRONG quant ties" in result.stdout, result.stdout[-3000:]
