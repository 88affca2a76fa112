"""`slurm` on a one-node cluster whose node declares GPUs (slurmctld validates the request): an
array of two shards, one GPU each, one at a time, grades a small day01 class on the CPU paths
(no real GPU here), and the CPU-only merge job writes one gradebook of both."""

import csv
import os
import subprocess
import time
import zipfile

import pytest
from slurm_cluster import GPUS, Cluster, missing_reason

from autograder import slurm
from autograder.__main__ import main
from course.spec import units

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
    assert (
        main(
            [
                "slurm",
                str(hand_ins),
                "--unit",
                UNIT.name,
                "--out",
                str(out),
                "--per-shard",
                "1",
                "--gpus-per-task",
                "1",
                "--at-once",
                "1",
                "--setup",
                "echo set-up ran on $(hostname)",
                "--cpus-per-task",
                "1",
                "--jobs",
                "1",
                "--time",
                "00:20:00",
                "--submit",
            ]
        )
        == 0
    )
    assert "(2 tasks)" in capsys.readouterr().out
    _wait_for(out / "gradebook.csv", cluster)
    with open(out / "gradebook.csv", newline="") as handle:
        rows = {row["Name"]: float(row["Total Score"]) for row in csv.DictReader(handle)}
    assert rows["alice"] > 1 and rows["bob"] == 0 and len(rows) == 2
    logs = sorted(os.listdir(out / "slurm"))
    assert sum(name.startswith("grade_") for name in logs) == 2 and any(name.startswith("merge_") for name in logs)
    for name in (name for name in logs if name.startswith("grade_")):
        assert "set-up ran on" in (out / "slurm" / name).read_text()


def test_the_cluster_refuses_more_gpus_than_a_node_has(cluster, tmp_path):
    job = slurm.Job(
        str(tmp_path / "class"), UNIT.name, str(tmp_path / "out"), shards=1, gpus_per_task=GPUS + 1, cpus_per_task=1
    )  # more cores than the node has would wait (PartitionConfig), not fail
    slurm.write(job)
    refused = subprocess.run(
        ["sbatch", str(tmp_path / "out" / "slurm" / "grade.sbatch")], env=cluster.env(), capture_output=True, text=True
    )
    assert refused.returncode != 0 and "not available" in refused.stderr, refused.stdout + refused.stderr


def test_the_array_asks_for_what_it_was_told(tmp_path):
    job = slurm.Job(
        "/class",
        UNIT.name,
        "/out",
        shards=7,
        gpus_per_task=2,
        memory="64G",
        at_once=3,
        sbatch_options=["--partition=gpu", "--gres=gpu:2"],
        setup=["module load cuda"],
        merge_time="00:10:00",
        merge_options=["--partition=cpu"],
        merge_args=["--roster", "/class/roster.csv", "--late-policy", "/class/late policy.toml"],
    )
    written = slurm.scripts(job)
    grade, merge = written["grade.sbatch"].splitlines(), written["merge.sbatch"].splitlines()
    for line in (
        "#SBATCH --array=0-6%3",
        "#SBATCH --ntasks=1",
        "#SBATCH --gpus-per-task=2",
        "#SBATCH --mem=64G",
        "#SBATCH --partition=gpu",
        "#SBATCH --time=04:00:00",
    ):
        assert line in grade
    assert grade.index("module load cuda") < next(i for i, line in enumerate(grade) if "grade-all" in line)
    assert '--shard "$SLURM_ARRAY_TASK_ID/7"' in written["grade.sbatch"] and "--gpus all" in written["grade.sbatch"]
    # the merge: one core, its own time and options, nothing of the array's GPUs or partition
    for line in ("#SBATCH --time=00:10:00", "#SBATCH --cpus-per-task=1", "#SBATCH --partition=cpu", "module load cuda"):
        assert line in merge
    assert not [line for line in merge if "gpu" in line.lower() or "--mem" in line]
    assert "afterany" in written["submit.sh"]
    assert "--roster /class/roster.csv --late-policy '/class/late policy.toml'" in written["merge.sbatch"]
