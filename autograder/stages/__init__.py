"""The stages of one grading (autograder/grade.py runs them in order): plan, baselines, read,
build, run (each group judged as it ends), report, extras. Each stage takes the grading's
shared resources (grading.py) and what the stages before it made."""
