"""`slurm` on a one-node cluster: an array of two shards grades a small day01 class on the
CPU paths, and the merge job writes one gradebook of both."""
import csv
import os
import subprocess
import time
import zipfile

import pytest

from autograder import slurm
from autograder.__main__ import main
from course.spec import units
from slurm_cluster import Cluster, missing_reason

pytestmark = pytest.mark.autograder
UNIT = units.load("day01_relu_bias")


@pytest.fixture
def cluster(tmp_path_factory, monkeypatch):
    reason = missing_reason()
    if reason:
        pytest.skip(f"no Slurm: {reason}")
    running = Cluster(str(tmp_path_factory.mktemp("slurm")))
    try:
        running.start()
        monkeypatch.setenv("SLURM_CONF", running.conf)
        yield running
    finally:
        running.stop()


def _wait_for(path, cluster, seconds=600):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        queued = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=cluster.env()).stdout
        if os.path.exists(path) and not queued.strip():
            return
        time.sleep(2)
    raise AssertionError(f"{path} never appeared; squeue: {queued}")


def test_an_array_of_shards_then_one_merged_gradebook(cluster, tmp_path, capsys):
    hand_ins = tmp_path / "class"
    UNIT.write("solution", str(tmp_path / "reference"))
    hand_ins.mkdir()
    with zipfile.ZipFile(hand_ins / "alice.zip", "w") as archive:
        for file in UNIT.files:
            archive.write(tmp_path / "reference" / file, file)
    (hand_ins / "bob.zip").write_bytes(b"not a zip")
    out = tmp_path / "graded out #2"  # sbatch splits a directive at spaces and takes # as a comment
    assert main(["slurm", str(hand_ins), "--unit", UNIT.name, "--out", str(out), "--per-shard", "1",
                 "--gpus-per-task", "0", "--cpus-per-task", "1", "--jobs", "1", "--time", "00:20:00", "--submit"]) == 0
    assert "(2 tasks)" in capsys.readouterr().out
    _wait_for(out / "gradebook.csv", cluster)
    with open(out / "gradebook.csv", newline="") as handle:
        rows = {row["Name"]: float(row["Total Score"]) for row in csv.DictReader(handle)}
    assert rows["alice"] > 1 and rows["bob"] == 0 and len(rows) == 2
    logs = sorted(os.listdir(out / "slurm"))
    assert sum(name.startswith("grade_") for name in logs) == 2 and any(name.startswith("merge_") for name in logs)


def test_the_array_asks_for_what_it_was_told(tmp_path):
    job = slurm.Job("/class", UNIT.name, "/out", shards=7, gpus_per_task=2, memory="64G",
                    sbatch_options=["--partition=gpu"])
    grade = slurm.scripts(job)["grade.sbatch"]
    for line in ("#SBATCH --array=0-6", "#SBATCH --gpus-per-task=2", "#SBATCH --mem=64G", "#SBATCH --partition=gpu"):
        assert line in grade.splitlines()
    assert '--shard "$SLURM_ARRAY_TASK_ID/7"' in grade and "--gpus all" in grade
    cpu_only = slurm.scripts(slurm.Job("/class", UNIT.name, "/out", shards=7, gpus_per_task=0))["grade.sbatch"]
    assert "--cpu-only" not in grade and "--gpus none --sandbox auto --no-reports --cpu-only" in cpu_only
    assert "afterany" in slurm.scripts(job)["submit.sh"]
