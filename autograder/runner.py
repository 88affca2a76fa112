"""Runs a group of cases in child processes (autograder/child.py), restarting after crashes
and hangs, and hands back each case's raw result. Nothing here judges.

A child and this runner talk through files in the group's folder; GroupFiles names them.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import torch

from course.build import kill_group
from course.cases import Case

CHILD_START_TIMEOUT = 120  # import torch, load the module, create the CUDA context
POLL_SECONDS = 0.05
MAX_RESTARTS = 4           # fresh children for one group after crashes
CUDA_CONTEXT_LOST = 70     # the child's exit code after a sticky CUDA error


class GroupFiles:
    """The file protocol between the runner and a child, in one group folder:
    request.json   what to load and which cases to run (written by the runner)
    <i>.inputs.pt  case i's input sets (runner)
    ready          the child loaded the module and is about to run cases (child)
    <i>.started    the child began case i (child)
    <i>.result.pt  case i's raw result, written whole (child)
    stdout.txt, stderr.txt  what the child printed."""

    def __init__(self, folder: str):
        self.folder = folder
        self.request = os.path.join(folder, "request.json")
        self.ready = os.path.join(folder, "ready")
        self.stdout = os.path.join(folder, "stdout.txt")
        self.stderr = os.path.join(folder, "stderr.txt")

    def inputs(self, index: int) -> str:
        return os.path.join(self.folder, f"{index}.inputs.pt")

    def started(self, index: int) -> str:
        return os.path.join(self.folder, f"{index}.started")

    def result(self, index: int) -> str:
        return os.path.join(self.folder, f"{index}.result.pt")


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _tail(path: str, lines: int = 6) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()[-4000:]
    except FileNotFoundError:
        return ""
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join("    | " + line[:200] for line in kept)


class GroupRunner:
    """Runs a list of cases in child processes, restarting after crashes and hangs."""

    def __init__(self, load: dict, work: str, env: dict):
        """`load`: what each child loads (the suite, and the student's build or none), as
        request.json carries it."""
        self.load, self.work, self.env = load, work, env
        self.spawn_seconds: list[float] = []

    def run(self, group: str, device: str, cases: list[tuple[int, Case]],
            inputs: dict[int, list[dict]]) -> dict[int, dict | str]:
        """{case index: raw result dict, or a string saying why there is none}."""
        outcomes: dict[int, dict | str] = {}
        pending = list(cases)
        for attempt in range(MAX_RESTARTS + 1):
            if not pending:
                break
            files = GroupFiles(os.path.join(self.work, f"{group}.{attempt}"))
            os.makedirs(files.folder)
            for index, _ in pending:
                torch.save(inputs[index], files.inputs(index))
            reason, touched = self._run_child(files, device, pending)
            done = {index for index, _ in pending if os.path.exists(files.result(index))}
            for index in done:
                outcomes[index] = torch.load(files.result(index), weights_only=True)
            if touched is not None and touched not in done:
                outcomes[touched] = reason
            if touched is None and reason:  # died before running any case: it would again
                for index, _ in pending:
                    if index not in done:
                        outcomes[index] = reason
            pending = [(i, c) for i, c in pending if i not in outcomes]
        for index, _ in pending:
            outcomes[index] = "not run: the test process crashed too many times"
        return outcomes

    def _run_child(self, files: GroupFiles, device: str, cases: list[tuple[int, Case]]) -> tuple[str, int | None]:
        """Run one child over `cases`. Returns (why it stopped early or '', index of the case it
        was running when it did, or None if it never started one)."""
        request = {**self.load, "device": device, "cases": [(i, c.name) for i, c in cases]}
        with open(files.request, "w") as handle:
            json.dump(request, handle)
        scratch = os.path.join(files.folder, "cwd")
        os.makedirs(scratch)
        started = time.perf_counter()
        with open(files.stdout, "wb") as out, open(files.stderr, "wb") as err:
            process = subprocess.Popen([sys.executable, "-m", "autograder.child", files.folder], cwd=scratch,
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=self.env,
                                       start_new_session=True)
            reason, touched = self._watch(process, files, cases, started)
        if reason and not reason.startswith("timed out"):
            tail = _tail(files.stderr)
            reason += ("\n  last lines on stderr:\n" + tail) if tail else ""
        return reason, touched

    def _watch(self, process: subprocess.Popen, files: GroupFiles, cases, started: float) -> tuple[str, int | None]:
        was_ready = False
        while True:
            code = process.poll()
            now = time.perf_counter()
            if not was_ready and os.path.exists(files.ready):
                was_ready = True
                self.spawn_seconds.append(now - started)
            running = self._running_case(files, cases)
            if code is not None:
                return self._exit_reason(code, was_ready, files, cases, running)
            if not was_ready and now - started > CHILD_START_TIMEOUT:
                kill_group(process)
                return f"the module did not load within {CHILD_START_TIMEOUT} s", None
            if running is not None:
                index, case, since = running
                if time.time() - since > case.timeout:
                    kill_group(process)
                    return f"timed out: still running after {case.timeout:.0f} s (an endless loop or a hang?)", index
            time.sleep(POLL_SECONDS)

    @staticmethod
    def _running_case(files: GroupFiles, cases) -> tuple[int, Case, float] | None:
        for index, case in cases:
            if os.path.exists(files.started(index)) and not os.path.exists(files.result(index)):
                return index, case, os.path.getmtime(files.started(index))
        return None

    @staticmethod
    def _exit_reason(code: int, was_ready: bool, files: GroupFiles, cases, running) -> tuple[str, int | None]:
        if code == 0 and all(os.path.exists(files.result(i)) for i, _ in cases):
            return "", None
        if code == CUDA_CONTEXT_LOST:
            return "", None  # the failing case wrote its own result; the rest get a fresh child
        how = f"was killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
        if not was_ready:
            return f"the test process {how} while loading the module (code that runs at import?)", None
        if running is not None:
            return f"the test process {how} during this test", running[0]
        return f"the test process {how} between tests", None
