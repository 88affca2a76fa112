"""Grades a student's submission of a course unit: isolated build, hidden tests run in
child processes, verdicts computed in this process, a Gradescope results.json."""
