"""Runs a group of cases in sandboxed child processes (autograder/child.py), a fresh child
after each crash or hang, and hands back each case's raw result. Nothing here judges.

A child and this runner talk through files in the child's own folder; GroupFiles names them.
The child can write that folder, so its files are hints: every time limit runs on this
process's own clock, every result is loaded as data only (weights_only), and the runner takes
a result only for the case it handed over, once.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import hashlib
import json
import marshal
import os
import secrets
import signal
import tempfile
import time
import types
from typing import NamedTuple

import torch

from autograder.deadline import Deadline
from autograder.gpu_lock import GpuLock, Held
from autograder.sandbox import CPUS, Limits, Run, Sandbox, python_command
from autograder.untrusted_files import clean_strings, open_regular
from course.cases import Case

CHILD_START_TIMEOUT = 120  # import torch, load the module, create the CUDA context
EXIT_GRACE = 5  # seconds a child that wrote every result gets to exit (a thread may hold it)
POLL_SECONDS = 0.01  # the child waits for each next case: a short poll keeps that wait short
CUDA_CONTEXT_LOST = 70  # the child's exit code after a sticky CUDA error


class CaseFiles(NamedTuple):
    """One case's files, named by a stem drawn when the runner hands the case over."""

    case: str  # the case, as data: what running it takes, not how it is judged nor its name (runner)
    inputs: str  # its input sets (runner)
    started: str  # the child began it (child)
    result: str  # its raw result, written whole (child)


class GroupFiles:
    """The file protocol between the runner and a child, in the child's folder:
    request.json       what to load (runner)
    warm               torch is imported and the CUDA context made; the child waits for go (child)
    go                 load the module and run the cases: the GPU's lock is held, if any (runner)
    ready              the child loaded the module and waits for its first case (child)
    next               the stem of the case handed over, or nothing: no more cases (runner;
                       the child takes it away)
    <stem>.case.pt, <stem>.inputs.pt, <stem>.started, <stem>.result.pt: CaseFiles
    A case's files are written, and its stem drawn (os.urandom), only when the runner hands it
    over, once the child's result for the case before is in: nothing the child runs can name,
    or write a result for, a case it has not been handed."""

    def __init__(self, folder: str):
        self.folder = folder
        self.request = os.path.join(folder, "request.json")
        self.warm = os.path.join(folder, "warm")
        self.go = os.path.join(folder, "go")
        self.ready = os.path.join(folder, "ready")
        self.next = os.path.join(folder, "next")

    def of(self, stem: str) -> CaseFiles:
        ends = ("case.pt", "inputs.pt", "started", "result.pt")
        return CaseFiles(*(os.path.join(self.folder, f"{stem}.{end}") for end in ends))

    # ---- the runner's side: it writes into a folder the child may have filled, so never
    # through a name the child could have made first (a link) ----

    def hand(self, case: Case, input_sets: list[dict], markers: list | None = None) -> CaseFiles:
        """Write `case` and its input sets under a new stem, then tell the child that stem.
        markers: the observer's for this case (autograder/observer/session.py), with the case."""
        stem = secrets.token_hex(16)
        files = self.of(stem)
        described = {**runnable_case(case), **({"observe": markers} if markers is not None else {})}
        for path, data in ((files.case, described), (files.inputs, input_sets)):
            with open(path, "xb") as handle:  # a new file, never one the child made
                torch.save(data, handle)
            os.chmod(path, 0o644)  # the grader's own file: a sandbox of another uid reads it whatever the umask
        self._tell(stem)
        return files

    def end(self) -> None:
        """Tell the child that no case is left."""
        self._tell("")

    def _tell(self, text: str) -> None:
        handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=".next.")
        with os.fdopen(handle, "w") as file:
            file.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, self.next)  # replaces a link the child left there, never follows it

    # ---- the child's side ----

    def take(self) -> CaseFiles | None:
        """Wait for the runner to hand over a case; its files, or None when none is left."""
        while not os.path.exists(self.next):
            time.sleep(0.002)
        with open(self.next) as handle:
            stem = handle.read()
        os.remove(self.next)
        return self.of(stem) if stem else None


def secret_order(cases: list[tuple[int, Case]], seed: int) -> list[tuple[int, Case]]:
    """`cases` in an order drawn from the grading's secret seed: no submission can tell which case
    comes when. The same for every run of one grading, so the baselines' child and the
    student's time a perf group's cases after the same work."""
    return sorted(cases, key=lambda item: hashlib.sha256(f"{seed}:order:{item[1].name}".encode()).digest())


def runnable_case(case: Case) -> dict:
    """What a child needs of a case to run it, as data: not its name, group or note, nor
    anything the judge alone reads (hint, error words and arguments, needs). An error case's spoilers (params["bad"]: {argument: function}, which
    the public suite's on_device applies where the op will see the arguments) cross as their
    code: each may use its argument and torch, nothing else of the hidden suite."""
    params = dict(case.params)
    if isinstance(params.get("bad"), dict):
        params["bad"] = {name: _code_of(spoil) for name, spoil in params["bad"].items()}
    return {
        **{f.name: getattr(case, f.name) for f in dataclasses.fields(case)},
        "params": params,
        "name": "",
        "group": "",
        "note": "",
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
        """{case index: raw result dict, or a string saying why there is none}, the cases handed
        over in the order given. Each child either returns results or is blamed for the case it
        stopped in; one that did neither would again, so the cases left get its reason."""
        outcomes: dict[int, dict | str] = {}
        pending = list(cases)
        while pending:
            if self.deadline.passed:
                outcomes.update({index: self.deadline.not_run() for index, _ in pending})
                break
            reason, blamed, results = self._run_child(group, device, pending, inputs)
            outcomes.update(results)
            if blamed is not None and blamed not in outcomes:
                outcomes[blamed] = reason
            if not results and blamed is None:
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
        reason, _, results = self._run_child(group, device, cases, inputs)
        return reason, results

    def _run_child(
        self, group: str, device: str, cases: list[tuple[int, Case]], inputs: dict[int, list[dict]]
    ) -> tuple[str, int | None, dict[int, dict | str]]:
        """Run one child over `cases`. Returns (why it stopped early or '', the case it is
        blamed for, or None, {case index: its result} of those it answered). In a batch, a child
        on the GPU loads its module and runs its cases holding the GPU's lock, alone for perf
        cases; it starts (torch, the CUDA context) without it, and no student code runs before
        it is held."""
        files = GroupFiles(self.sandbox.folder(self.work, f"{self.prefix}{group}."))
        with open(files.request, "w") as handle:
            # The observer's markers travel with each case as it is handed over, not all at once.
            json.dump({**{k: v for k, v in self.load.items() if k != "observe"}, "device": device}, handle)
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

        handing = _Handing(files, cases, inputs, self)
        try:
            reason, blamed = self._watch(run, handing, open_gate if gated else None)
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
        return reason, blamed, handing.results

    def _gated(self, device: str) -> bool:
        """Whether a child on `device` waits for the GPU's lock before it loads the module."""
        return self.gpu_lock is not None and device.startswith("cuda")

    def _watch(self, run: Run, handing: _Handing, open_gate=None) -> tuple[str, int | None]:
        """Follow the child on this process's clock, handing it one case at a time: a case's
        time counts from when this process first saw it start (or handed it over), whatever
        the child does to its files afterwards. A warm child is let go by open_gate() where
        given: it waits for the GPU's lock, and its waiting counts against neither its start
        nor any case."""
        files = handing.files
        started = time.monotonic()
        waited = 0.0  # for the GPU's lock
        gate_open, ready_at = open_gate is None, None
        while True:
            code = run.poll()
            now = time.monotonic()
            if not gate_open and os.path.exists(files.warm):
                gate_open = True
                open_gate()  # blocks while other runs hold the GPU
                waited, now = time.monotonic() - now, time.monotonic()
            if ready_at is None and os.path.exists(files.ready):
                ready_at = now
                self.spawn_seconds.append(now - started - waited)
            if ready_at is not None:
                handing.follow(now, more=code is None)
            running = handing.running
            if code is not None:
                self.exit_code = code
                return self._exit_reason(code, ready_at is not None, running, handing.all_done)
            if self.deadline.passed:
                return self.deadline.not_run(), running
            if handing.all_done:
                if now - handing.since > EXIT_GRACE:  # its work is done; a thread of its own holds it
                    return "", None
            elif ready_at is None:
                if now - started - waited > CHILD_START_TIMEOUT * self.slowdown:
                    return f"the module did not load within {CHILD_START_TIMEOUT * self.slowdown:.0f} s", None
            elif now - handing.since > handing.timeout:
                if running is not None:
                    return (
                        f"timed out: still running after {handing.timeout:.0f} s (an endless loop or a hang?)"
                    ), running
                return f"the test process stopped between tests for {handing.timeout:.0f} s", None
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


class _Handing:
    """The runner's side of one child's cases: it hands them over one at a time, in order, and
    takes each one's result once, from the files of the case in hand alone."""

    def __init__(self, files: GroupFiles, cases: list[tuple[int, Case]], inputs: dict, runner: GroupRunner):
        self.files, self.inputs, self.runner = files, inputs, runner
        self.queue = list(cases)
        self.results: dict[int, dict | str] = {}
        self.in_hand: tuple[int, Case, CaseFiles] | None = None
        self.seen_started = False
        self.since = 0.0  # when the case in hand was handed over or seen started; else the last result
        self.ended = False  # the child was told that no case is left

    @property
    def all_done(self) -> bool:
        return not self.queue and self.in_hand is None

    @property
    def running(self) -> int | None:
        """The case the child was seen to start and has not answered."""
        return self.in_hand[0] if self.in_hand and self.seen_started else None

    @property
    def timeout(self) -> float:
        return self.runner.timeout(self.in_hand[1]) if self.in_hand else 0.0

    def follow(self, now: float, more: bool) -> None:
        """Note what the child did with the case in hand; then hand over the next one (`more`:
        the child still runs), or say that none is left."""
        if self.in_hand is not None:
            index, _, files = self.in_hand
            if not self.seen_started and os.path.exists(files.started):
                self.seen_started, self.since = True, now
            if os.path.exists(files.result):
                self.results[index] = load_result(files.result)  # taken once: never read again
                self.runner.case_seconds[index] = now - self.since
                self.in_hand, self.since = None, now
            elif self.seen_started:
                self.runner.case_seconds[index] = now - self.since  # so far: a case the child stops in keeps it
        if self.in_hand is None and more and self.queue:
            self._hand_next()
        elif self.all_done and more and not self.ended:
            self.ended = True
            with contextlib.suppress(OSError):  # a child that blocks the way only waits until it is stopped
                self.files.end()

    def _hand_next(self) -> None:
        index, case = self.queue.pop(0)
        try:
            markers = self.runner.load.get("observe", {}).get(str(index))
            self.in_hand = (index, case, self.files.hand(case, self.inputs[index], markers))
        except OSError as error:  # the child made the name the runner tells it by something else
            self.results[index] = f"the test process kept its next test from being handed over ({error.strerror})"
        except RuntimeError as error:  # torch.save's short write: a full disk, which a child can fill
            self.results[index] = f"the grader could not write this test's inputs ({str(error)[:200]})"
        self.seen_started, self.since = False, time.monotonic()
