"""The autograder's command lines refuse bad arguments before any work, naming the argument
and what was expected: an instructor's typo costs a message, not a traceback or a class's
gradings. (Nothing here builds or grades.)"""

import pytest

from autograder.__main__ import main

UNIT = "day01_relu_bias"


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a_file"
    path.write_text("not a folder")
    return str(path)


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["grade", "{submissions}", "--unit", UNIT, "--time-limit", "0"],
            "--time-limit 0.0: expected a number of seconds",
        ),
        (["grade", "{submissions}", "--unit", UNIT, "--time-limit", "nan"], "--time-limit nan"),
        (["grade", "{submissions}", "--unit", UNIT, "--out", "{a_file}"], "--out '{a_file}': expected a folder"),
        (["grade", "{submissions}", "--unit", UNIT, "--work", "{a_file}"], "--work '{a_file}': expected a folder"),
        (["reference", "--unit", "day99_nothing"], "invalid choice: 'day99_nothing'"),
        (["grade-all", "{submissions}", "--unit", UNIT, "--out", "{a_file}"], "--out '{a_file}': expected a folder"),
        (
            ["grade-all", "{submissions}", "--unit", UNIT, "--out", "{tmp}/out", "--time-limit", "-5"],
            "--time-limit -5.0",
        ),
        (
            ["grade-all", "{submissions}", "--unit", UNIT, "--out", "{tmp}/out", "--gpus", "none"],
            "GPU cases and no GPU is visible here; grade on a GPU machine, or pass --cpu-only",
        ),
        (
            ["grade-all", "{submissions}", "--unit", UNIT, "--out", "{tmp}/out", "--cpu-only", "--roster", "{a_file}"],
            "--roster '{a_file}': expected a CSV file whose first row names one or more of the columns id, name, email, sid",
        ),
        (
            ["grade-all", "{submissions}", "--unit", UNIT, "--out", "{tmp}/out", "--cpu-only", "--due", "soon"],
            "--due 'soon': expected a date and time",
        ),
        (
            [
                "grade-all",
                "{submissions}",
                "--unit",
                UNIT,
                "--out",
                "{tmp}/out",
                "--cpu-only",
                "--late-policy",
                "{a_file}",
            ],
            "--late-policy '{a_file}': expected a readable TOML file",
        ),
        (
            ["grade-all", "{submissions}", "--unit", UNIT, "--out", "{tmp}/out", "--cpu-only"]
            + ["--late-policy", "{a_file}", "--due", "2031-03-01T23:59"],
            "expected --due or --late-policy, not both",
        ),
        (
            ["grade-all", "{submissions}", "--unit", UNIT, "--out", "{tmp}/out", "--cpu-only", "--only", "bob"],
            "--only bob: no submission has this id; expected one of alice",
        ),
        (["merge", "{tmp}/nothing_graded_here", "--unit", UNIT], "expected the --out folder the shards graded into"),
        (["merge", "{a_file}", "--unit", UNIT], "expected the --out folder the shards graded into"),
        (["slurm", "{submissions}", "--unit", UNIT, "--out", "{a_file}"], "--out '{a_file}': expected a folder"),
        (
            ["slurm", "{submissions}", "--unit", UNIT, "--out", "{tmp}/out", "--jobs", "-1"],
            "--jobs -1: expected a whole",
        ),
        (
            [
                "slurm",
                "{submissions}",
                "--unit",
                UNIT,
                "--out",
                "{tmp}/out",
                "--sbatch-option",
                "--partition=gpu\nrm -rf ~",
            ],
            "expected one line",
        ),
        (["gradescope", UNIT, "{tmp}/no_such_folder/autograder.zip"], "the folder to write it in does not exist"),
    ],
)
def test_a_bad_argument_is_named_before_any_work(tmp_path, a_file, capsys, argv, said):
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    (submissions / "alice.ipynb").write_text("{}")
    values = dict(submissions=str(submissions), a_file=a_file, tmp=str(tmp_path))
    with pytest.raises(SystemExit) as exit_:
        main([part.format(**values) for part in argv])
    assert exit_.value.code == 2
    assert said.format(**values) in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any work
