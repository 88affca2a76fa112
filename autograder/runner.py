"""Runs a group of cases in sandboxed child processes (autograder/child.py), a fresh child
after each crash or hang, and hands back each case's raw result. Nothing here judges.

A child and this runner talk through files in the child's own folder; GroupFiles names them.
The child can write that folder, so its files are hints: every time limit runs on this
process's own clock, and every result is loaded as data only (weights_only).
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import marshal
import os
import signal
import time
import types

import torch

from autograder.deadline import Deadline
from autograder.gpu_lock import GpuLock, Held
from autograder.sandbox import CPUS, Limits, Run, Sandbox, python_command
from autograder.untrusted_files import clean_strings, open_regular
from course.cases import Case

CHILD_START_TIMEOUT = 120  # import torch, load the module, create the CUDA context
EXIT_GRACE = 5  # seconds a child that wrote every result gets to exit (a thread may hold it)
POLL_SECONDS = 0.05
CUDA_CONTEXT_LOST = 70  # the child's exit code after a sticky CUDA error


class GroupFiles:
    """The file protocol between the runner and a child, in the child's folder:
    request.json   what to load and which cases to run (written by the runner)
    <i>.case.pt    case i, as data: what running it takes, not how it is judged (runner)
    <i>.inputs.pt  case i's input sets (runner)
    warm           torch is imported and the CUDA context made; the child waits for go (child)
    go             load the module and run the cases: the GPU's lock is held, if any (runner)
    ready          the child loaded the module and is about to run cases (child)
    <i>.started    the child began case i (child)
    <i>.result.pt  case i's raw result, written whole (child)"""

    def __init__(self, folder: str):
        self.folder = folder
        self.request = os.path.join(folder, "request.json")
        self.warm = os.path.join(folder, "warm")
        self.go = os.path.join(folder, "go")
        self.ready = os.path.join(folder, "ready")

    def case(self, index: int) -> str:
        return os.path.join(self.folder, f"{index}.case.pt")

    def inputs(self, index: int) -> str:
        return os.path.join(self.folder, f"{index}.inputs.pt")

    def write_cases(self, cases: list[tuple[int, Case]], inputs: dict[int, list[dict]]) -> None:
        """Each case and its input sets. The child gets the case as data (runnable_case): it
        never imports the hidden suite, whose other cases, hints and reference stay the grader's."""
        for index, case in cases:
            torch.save(runnable_case(case), self.case(index))
            torch.save(inputs[index], self.inputs(index))

    def started(self, index: int) -> str:
        return os.path.join(self.folder, f"{index}.started")

    def result(self, index: int) -> str:
        return os.path.join(self.folder, f"{index}.result.pt")


def runnable_case(case: Case) -> dict:
    """What a child needs of a case to run it, as data: nothing the judge alone reads (hint,
    error words and arguments, needs). An error case's spoilers (params["bad"]: {argument: function}, which
    the public suite's on_device applies where the op will see the arguments) cross as their
    code: each may use its argument and torch, nothing else of the hidden suite."""
    params = dict(case.params)
    if isinstance(params.get("bad"), dict):
        params["bad"] = {name: _code_of(spoil) for name, spoil in params["bad"].items()}
    return {
        **{f.name: getattr(case, f.name) for f in dataclasses.fields(case)},
        "params": params,
        "hint": "",
        "error_words": (),
        "error_arguments": (),
        "needs": (),
    }


def case_from_data(data: dict) -> Case:
    """The case runnable_case described, its spoilers made functions again (in the child)."""
    params = dict(data["params"])
    if isinstance(params.get("bad"), dict):
        params["bad"] = {
            name: types.FunctionType(marshal.loads(code), {"torch": torch, "__builtins__": builtins})
            for name, code in params["bad"].items()
        }
    return Case(**{**data, "params": params})


def _code_of(spoil) -> bytes:
    if not isinstance(spoil, types.FunctionType) or spoil.__code__.co_freevars:
        raise ValueError(f"an error case's spoiler must be a function of its argument alone, not {spoil!r}")
    return marshal.dumps(spoil.__code__)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _tail(text: str, lines: int = 6) -> str:
    kept = [line for line in text[-4000:].splitlines() if line.strip()][-lines:]
    return "\n".join("    | " + line[:200] for line in kept)


def load_result(path: str) -> dict | str:
    """A child's result file as data, its text cleaned for the report, or why it cannot be read."""
    try:
        with open_regular(path) as handle:
            return clean_strings(torch.load(handle, weights_only=True, map_location="cpu"))
    except Exception as error:
        return f"the test process left a result file that could not be read ({type(error).__name__})"


class GroupRunner:
    """Runs a list of cases in sandboxed children, a fresh child after each one that stops early."""

    def __init__(
        self,
        load: dict,
        sandbox: Sandbox,
        work: str,
        env: dict,
        deadline: Deadline,
        *,
        prefix: str,
        shared: tuple[str, ...] = (),
        case_timeout: float | None = None,
        wrapper: tuple[str, ...] = (),
        slowdown: float = 1.0,
        gpu_lock: GpuLock | None = None,
        observer=None,
    ):
        """`load`: what each child loads (the suite, and the student's build or none), as
        request.json carries it. `shared`: folders every child may write besides its own (the
        build, whose loader copies the library). `case_timeout`: a cap on every case's own.
        `wrapper`: a command the child runs under (compute-sanitizer), which makes every case
        `slowdown` times slower. `gpu_lock`: the GPU's, in a batch (autograder/gpu_lock.py): a
        child on the GPU runs its cases holding it, alone for perf cases. `observer`: each child
        runs under it (autograder/observer/session.py); what it saw of each is in `observed`."""
        self.load, self.sandbox, self.work, self.env, self.deadline = load, sandbox, work, env, deadline
        self.prefix, self.shared, self.case_timeout = prefix, shared, case_timeout
        self.wrapper, self.slowdown, self.gpu_lock = wrapper, slowdown, gpu_lock
        self.observer = observer
        self.observed: list = []  # the observer's Records of each child, in turn
        self.lock_wait_seconds = 0.0
        self.spawn_seconds: list[float] = []
        # Each case's time on this process's clock, to a poll: from when it was seen to start (or
        # the previous case's end) to when its result was seen (or its child's end).
        self.case_seconds: dict[int, float] = {}
        self.exit_code: int | None = None  # the last child's (its wrapper's, if any)
        self.stdout = ""  # the last child's standard output

    def timeout(self, case: Case) -> float:
        return self.slowdown * (min(case.timeout, self.case_timeout) if self.case_timeout else case.timeout)

    def run(
        self, group: str, device: str, cases: list[tuple[int, Case]], inputs: dict[int, list[dict]]
    ) -> dict[int, dict | str]:
        """{case index: raw result dict, or a string saying why there is none}. Each child
        either returns results or is blamed for the case it stopped in; one that did neither
        would again, so the cases left get its reason."""
        outcomes: dict[int, dict | str] = {}
        pending = list(cases)
        while pending:
            if self.deadline.passed:
                outcomes.update({index: self.deadline.not_run() for index, _ in pending})
                break
            files = GroupFiles(self.sandbox.folder(self.work, f"{self.prefix}{group}."))
            files.write_cases(pending, inputs)
            reason, blamed = self._run_child(files, device, pending)
            before = len(outcomes)
            for index, _ in pending:
                if os.path.exists(files.result(index)):
                    outcomes[index] = load_result(files.result(index))
            if blamed is not None and blamed not in outcomes:
                outcomes[blamed] = reason
            if len(outcomes) == before:
                why = reason or "the test process stopped without running its tests"
                outcomes.update({index: why for index, _ in pending})
            pending = [(i, c) for i, c in pending if i not in outcomes]
        return outcomes

    def run_once(
        self, group: str, device: str, cases: list[tuple[int, Case]], inputs: dict[int, list[dict]]
    ) -> tuple[str, dict[int, dict | str]]:
        """One child over `cases`, never restarted: (why it stopped early or '', {case index:
        raw result, or why there is none} of the cases that left one). Its exit code and
        output are then in exit_code and stdout."""
        files = GroupFiles(self.sandbox.folder(self.work, f"{self.prefix}{group}."))
        files.write_cases(cases, inputs)
        reason, _ = self._run_child(files, device, cases)
        return reason, {
            index: load_result(files.result(index)) for index, _ in cases if os.path.exists(files.result(index))
        }

    def _run_child(self, files: GroupFiles, device: str, cases: list[tuple[int, Case]]) -> tuple[str, int | None]:
        """Run one child over `cases`. Returns (why it stopped early or '', the case it is
        blamed for, or None). In a batch, a child on the GPU loads its module and runs its
        cases holding the GPU's lock, alone for perf cases; it starts (torch, the CUDA
        context) without it, and no student code runs before it is held."""
        request = {**self.load, "device": device, "cases": [(i, c.name) for i, c in cases]}
        with open(files.request, "w") as handle:
            json.dump(request, handle)
        gated = self._gated(device)
        if not gated:
            open(files.go, "w").close()
        watch = self.observer.attach(files.folder) if self.observer is not None else None
        self.sandbox.give(files.folder)
        wall = CHILD_START_TIMEOUT * self.slowdown + sum(self.timeout(c) for _, c in cases)
        self.exit_code, self.stdout = None, ""
        # The kernels Triton and inductor compile are kept in the first shared folder, so the
        # children of one submission (or of one reference copy) compile each once; nobody else's
        # children are given that folder.
        jit_cache = os.path.join(self.shared[0], "jit") if self.shared else None
        run = self.sandbox.start(
            [*self.wrapper, *python_command("-m", "autograder.child", files.folder)],
            writable=[files.folder, *self.shared],
            cwd=files.folder,
            env={**self.env, **watch.env} if watch else self.env,
            limits=Limits(cpu_seconds=int(wall * CPUS)),
            jit_cache=jit_cache,
            pass_fds=watch.fds if watch else (),
        )
        if watch:
            watch.started()
        held: list[Held] = []
        alone = any(case.kind == "perf" for _, case in cases)

        def open_gate() -> None:
            start = time.monotonic()
            lock = self.gpu_lock.acquire(alone, lambda: self.deadline.passed or run.poll() is not None)
            self.lock_wait_seconds += time.monotonic() - start
            if lock is not None:
                held.append(lock)
                open(files.go, "w").close()

        try:
            reason, blamed = self._watch(run, files, cases, open_gate if gated else None)
        finally:
            run.kill()  # whatever it left running, before the lock goes
            for lock in held:
                lock.release()
            self.stdout = run.stdout()
            if watch:
                self.observed.append(watch.finish())
        if reason and not reason.startswith(("timed out", "not run")):
            tail = _tail(run.stderr())
            reason += ("\n  last lines on stderr:\n" + tail) if tail else ""
        return reason, blamed

    def _gated(self, device: str) -> bool:
        """Whether a child on `device` waits for the GPU's lock before it loads the module."""
        return self.gpu_lock is not None and device.startswith("cuda")

    def _watch(
        self, run: Run, files: GroupFiles, cases: list[tuple[int, Case]], open_gate=None
    ) -> tuple[str, int | None]:
        """Follow the child on this process's clock: a case's time counts from when this
        process first saw it start, whatever the child does to its files afterwards. A warm
        child is let go by open_gate() where given: it waits for the GPU's lock, and its
        waiting counts against neither its start nor any case."""
        timeouts = {index: self.timeout(case) for index, case in cases}
        started = idle_since = time.monotonic()
        waited = 0.0  # for the GPU's lock
        gate_open, ready_at, ended, seen = open_gate is None, None, set(), {}  # seen: case -> first seen started
        while True:
            code = run.poll()
            now = time.monotonic()
            if not gate_open and os.path.exists(files.warm):
                gate_open = True
                open_gate()  # blocks while other runs hold the GPU
                waited, now = time.monotonic() - now, time.monotonic()
            if ready_at is None and os.path.exists(files.ready):
                ready_at = idle_since = now
                self.spawn_seconds.append(now - started - waited)
            done = {i for i, _ in cases if os.path.exists(files.result(i))}
            if done != ended:
                mark = idle_since  # the previous case's end: the child runs its cases in order
                for index, _ in cases:
                    if index in done and index not in ended:
                        self.case_seconds[index] = now - max(seen.get(index, mark), mark)
                        mark = now  # any after it that ended in this poll took less than a poll
                ended, idle_since = done, now
            for index, _ in cases:
                if index not in seen and index not in done and os.path.exists(files.started(index)):
                    seen[index] = now
            running = next((i for i, _ in cases if i in seen and i not in done), None)
            if running is not None:
                self.case_seconds[running] = now - seen[running]  # so far: a case the child stops in keeps it
            if code is not None:
                self.exit_code = code
                return self._exit_reason(code, ready_at is not None, running, len(done) == len(cases))
            if self.deadline.passed:
                return self.deadline.not_run(), running
            if len(done) == len(cases):
                if now - idle_since > EXIT_GRACE:  # its work is done; a thread of its own holds it
                    return "", None
            elif ready_at is None:
                if now - started - waited > CHILD_START_TIMEOUT * self.slowdown:
                    return f"the module did not load within {CHILD_START_TIMEOUT * self.slowdown:.0f} s", None
            elif running is not None:
                if now - seen[running] > timeouts[running]:
                    return (
                        f"timed out: still running after {timeouts[running]:.0f} s (an endless loop or a hang?)"
                    ), running
            else:  # between tests: the next one should start at once
                waiting = timeouts[next(i for i, _ in cases if i not in done)]
                if now - idle_since > waiting:
                    return f"the test process stopped between tests for {waiting:.0f} s", None
            time.sleep(POLL_SECONDS)

    @staticmethod
    def _exit_reason(code: int, was_ready: bool, running: int | None, all_done: bool) -> tuple[str, int | None]:
        if code == 0 and all_done:
            return "", None
        if code == CUDA_CONTEXT_LOST and running is None:
            return "", None  # the failing case wrote its own result; the rest get a fresh child
        how = f"was killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
        if not was_ready:
            return f"the test process {how} while loading the module (code that runs at import?)", None
        if running is not None:
            return f"the test process {how} during this test", running
        return f"the test process {how} between tests", None
