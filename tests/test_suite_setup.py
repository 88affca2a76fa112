"""The test suite's own set-up (tests/conftest.py)."""

import os
import subprocess
import sys

CONFTEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conftest.py")

# Runs conftest's set-up for each (worker, WORKER_GPUS) and prints the GPUs it leaves visible.
PROBE = f"""
import os, runpy, sys
for worker, gpus in [tuple(pair.split("=")) for pair in sys.argv[1:]]:
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    os.environ.update(PYTEST_XDIST_WORKER=worker, WORKER_GPUS=gpus)
    try:
        runpy.run_path({CONFTEST!r})
        print(os.environ.get("CUDA_VISIBLE_DEVICES", "all"))
    except ValueError as error:
        print("error:", error)
"""


def _probe(code: str, args: list[str], unset: str, **env: str) -> list[str]:
    """The lines `code` prints, run with `args` in a fresh interpreter, `unset` left out of its
    environment and `env` added."""
    base = {key: value for key, value in os.environ.items() if key != unset}
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=os.path.dirname(CONFTEST),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()


def _visible(*pairs: str) -> list[str]:
    return _probe(PROBE, list(pairs), "CUDA_VISIBLE_DEVICES")


def test_worker_gpus_gives_each_xdist_worker_one_gpu_of_the_list():
    assert _visible("gw0=2, 5", "gw1=2, 5", "gw2=2, 5", "gw7=3", "gw1=") == ["2", "5", "2", "3", "all"]


def test_worker_gpus_without_an_index_is_refused_by_name():
    assert _visible("gw0=,") == ["error: WORKER_GPUS=',': expected GPU indices separated by commas, such as 0,1"]


# Runs conftest's set-up with PYTEST_XDIST_WORKER_COUNT and prints OMP_NUM_THREADS.
THREADS_PROBE = f"""
import os, runpy, sys
os.environ.update(PYTEST_XDIST_WORKER="gw0", PYTEST_XDIST_WORKER_COUNT=sys.argv[1])
runpy.run_path({CONFTEST!r})
from autograder.sandbox import CPUS
print(os.environ.get("OMP_NUM_THREADS", "unset"), CPUS)
"""


def _threads(workers: str, **env: str) -> tuple[str, int]:
    threads, cpus = _probe(THREADS_PROBE, [workers], "OMP_NUM_THREADS", **env)[0].split()
    return threads, int(cpus)


def test_each_xdist_worker_gets_its_share_of_the_cores():
    threads, cpus = _threads("3")
    assert threads == str(max(1, cpus // 3))
    assert _threads("1")[0] == "unset"  # one worker: torch's own choice
    assert _threads("3", OMP_NUM_THREADS="5")[0] == "5"  # a choice made outside stays
