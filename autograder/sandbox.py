"""The trust boundary: every build and run of student code goes through Sandbox.start.

Modes, best first (docs/security.md says what each protects):
- bwrap: bubblewrap namespaces. The root file system is read-only, /tmp and the grader's
  home are empty, only the folders a run needs are writable, no network, a PID namespace
  killed whole at the end. When the grader is root, the command runs as a uid of its own.
- uid: no namespaces (user namespaces off, no bwrap): a uid of the grading's own, never the
  last grading's (autograder/uid_pool.py), killed process by process at the end, its files in
  the folders any user may write removed; the hidden folders closed to other users, and no
  shared ccache.
- none: only when asked for (local debugging). Student code runs as the grader.

Every mode scrubs the environment and sets rlimits. The mode is detected by trying it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field

from autograder.uid_pool import UID_RANGE, clean_up, kill_every_process_of, take_uid

MODES = ("auto", "bwrap", "uid", "none")
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The group that earlier versions let write a shared ccache folder, below the sandboxes' uids
# (autograder/uid_pool.py): a folder of that group is still closed to them.
CCACHE_GID = 63999
TMPFS_BYTES = 1 << 30  # the private /tmp lives in memory (and /dev/shm, a quarter of this)
# The cores this process may run on: under taskset or a cpuset, fewer than the machine has.
CPUS = max(1, len(os.sched_getaffinity(0)))
OUTPUT_KEPT = 64 << 10  # of a run's stdout and stderr, the first and the last this many bytes each
# Variables a run keeps; HOME and TMPDIR are set to its folder. Anything else (secrets
# included) is dropped.
ENV_NAMES = {
    "PATH",
    "LANG",
    "LC_ALL",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "MAX_JOBS",
    "CC",
    "CXX",
    "CPATH",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NVIDIA_VISIBLE_DEVICES",
    "COURSE_OBSERVER_FD",  # the observer's pipe (autograder/observer/), with CUDA_INJECTION64_PATH
    "COURSE_NEW_MEMORY_UNFILLED",  # course.harness.UNFILLED: under initcheck, new tensors left unwritten
}
ENV_PREFIXES = ("CUDA_", "TORCH_", "PYTORCH_", "CUBLAS_", "CCACHE_", "NVCC_")


@dataclass(frozen=True)
class Limits:
    """rlimits of one run. Memory is RLIMIT_DATA (private writable memory), not RLIMIT_AS:
    CUDA reserves address space far beyond any machine's memory."""

    cpu_seconds: int
    memory_bytes: int = 16 << 30
    file_bytes: int = 4 << 30
    processes: int = 1024  # tasks of the sandbox uid, threads included; only with a uid of its own

    def apply(self, own_uid: bool) -> None:
        """In the child, before exec."""
        settings = [
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_DATA, self.memory_bytes),
            (resource.RLIMIT_FSIZE, self.file_bytes),
            (resource.RLIMIT_CORE, 0),
        ]
        if own_uid:  # the count is per uid: the grader's own would count its other processes
            settings.append((resource.RLIMIT_NPROC, self.processes))
        for which, value in settings:
            _, hard = resource.getrlimit(which)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))


class SandboxError(RuntimeError):
    pass


def scrubbed_env(env: dict, home: str) -> dict:
    kept = {k: v for k, v in env.items() if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}
    python_path = [PACKAGE_ROOT, *(p for p in kept.get("PYTHONPATH", "").split(os.pathsep) if p and p != PACKAGE_ROOT)]
    # A sandbox uid has no passwd entry: getpass.getuser() (torch.profiler calls it) reads
    # LOGNAME and USER before it asks getpwuid, which would fail.
    return {
        **kept,
        "HOME": home,
        "TMPDIR": os.path.join(home, "tmp"),
        "PYTHONNOUSERSITE": "1",
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "PYTHONPATH": os.pathsep.join(python_path),
    }


class _Capture(threading.Thread):
    """Reads one pipe to its end, keeping its first and last OUTPUT_KEPT bytes: a flood never
    reaches the disk, and never blocks the writer."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe, self.head, self.tail, self.dropped = pipe, bytearray(), bytearray(), 0
        self.start()

    def run(self) -> None:
        with contextlib.suppress(OSError, ValueError), self.pipe:
            while chunk := os.read(self.pipe.fileno(), 1 << 16):
                room = OUTPUT_KEPT - len(self.head)
                self.head += chunk[:room]
                self.tail += chunk[room:] if room > 0 else chunk
                if len(self.tail) > OUTPUT_KEPT:
                    self.dropped += len(self.tail) - OUTPUT_KEPT
                    del self.tail[:-OUTPUT_KEPT]

    def text(self) -> str:
        self.join(timeout=5)
        middle = f"\n[... {self.dropped} bytes left out ...]\n" if self.dropped else ""
        return bytes(self.head).decode(errors="replace") + middle + bytes(self.tail).decode(errors="replace")


class Run:
    """One sandboxed process: poll it, kill it and everything it started, read its output."""

    def __init__(self, sandbox: Sandbox, process: subprocess.Popen):
        self.sandbox, self.process = sandbox, process
        self._stdout, self._stderr = _Capture(process.stdout), _Capture(process.stderr)

    def poll(self) -> int | None:
        """The exit code (-N: killed by signal N), or None while it runs."""
        return self._as_signal(self.process.poll())

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None if it still runs after `timeout` seconds (then killed)."""
        try:
            return self._as_signal(self.process.wait(timeout=max(0.0, timeout)))
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def _as_signal(self, code: int | None) -> int | None:
        # bwrap exits with 128 + N when the command was killed by signal N, as a shell does
        if code is not None and self.sandbox.mode == "bwrap" and 128 < code < 128 + signal.NSIG:
            return 128 - code
        return code

    def kill(self) -> None:
        """The whole tree: the bwrap namespace, every process of the sandbox uid."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.sandbox.kill_all()

    def stdout(self) -> str:
        return self._stdout.text()

    def stderr(self) -> str:
        return self._stderr.text()


@dataclass
class Sandbox:
    """The sandbox of one grading: its mode, its uid (None: the grader's own) and what runs may read."""

    mode: str
    uid: int | None = None
    read_only: tuple[str, ...] = ()
    ccache_dir: str | None = None
    hidden: tuple[str, ...] = ()  # folders a run never reads, but for read_only files in them
    _lock: object = field(default=None, repr=False)
    work: str | None = None  # the grading's folder, which it removes itself
    view: str | None = None  # uid mode: where runs read the read_only files under `hidden`

    # ---- setting up ----

    @classmethod
    def open(cls, requested: str, work: str, *, read_only=(), hidden=(), env: dict | None = None) -> Sandbox:
        """The best mode that works here (or the one requested), tried in a folder under `work`.
        `hidden`: folders no run reads (the course's solutions: reference sources, answer keys,
        mutants), but for the `read_only` paths under them (the suite a child imports): bwrap
        runs see them empty, uid runs may not enter them and read a copy (`seen_as`)."""
        if requested not in MODES:
            raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}, got {requested!r}")
        env = os.environ if env is None else env
        paths = tuple(sorted({os.path.realpath(p) for p in (*read_only, *_paths_runs_need(env)) if os.path.exists(p)}))
        ccache = env.get("CCACHE_DIR") if env.get("CCACHE_DIR") and "CCACHE_DISABLE" not in env else None
        tried = []
        for mode, own_uid in _candidates(requested):
            uid, lock = take_uid(keep=(work,)) if own_uid else (None, None)
            if own_uid and uid is None:
                tried.append(f"{mode} with a uid of its own: no free uid in {UID_RANGE}")
                continue
            hides = tuple(os.path.realpath(p) for p in hidden if os.path.isdir(p))
            # A uid run may write the shared cache's files, which another grading's build reads.
            shared = None if mode == "uid" else ccache
            sandbox = cls(mode, uid, paths, shared, hides, lock, work=os.path.realpath(work))
            problem = sandbox._try(work, env)
            if not problem:
                if mode == "uid" and uid is not None:
                    sandbox._hide_from_uid(env)
                return sandbox
            sandbox.close()
            tried.append(f"{mode}{' with a uid of its own' if own_uid else ''}: {problem}")
        raise SandboxError(
            f"no sandbox works on this machine ({'; '.join(tried) or 'none to try'}). "
            + cure(os.geteuid() == 0, shutil.which("bwrap") is not None, _paths_a_run_reads())
            + " --sandbox none runs student code unprotected, for local debugging only."
        )

    def _try(self, work: str, env: dict) -> str:
        """'' when a run works: it imports the course's build module and finds torch."""
        try:
            if self.ccache_dir:
                os.makedirs(self.ccache_dir, exist_ok=True)
            folder = self.folder(work, "sandbox_check_")
            probe = (
                "import importlib.util, sys, course.build; open('ok', 'w').close(); "
                "sys.exit(0 if importlib.util.find_spec('torch') else 3)"
            )
            run = self.start(
                python_command("-c", probe), writable=[folder], cwd=folder, env=env, limits=Limits(cpu_seconds=60)
            )
            code = run.wait(60)
            if code == 0 and os.path.exists(os.path.join(folder, "ok")):
                return ""
            return f"a test run exited with {code}: {(run.stderr() or run.stdout()).strip()[-300:]}"
        except (OSError, subprocess.SubprocessError) as error:
            return str(error)

    def _hide_from_uid(self, env: dict) -> None:
        """What bwrap does with mounts, done with permissions: the `hidden` folders are closed to
        other users (for good: a grading running beside this one relies on it too), and the
        `read_only` files under them are copied into a folder of the grading's, `view`, which
        runs read instead (`seen_as`). The folders on CPATH (a precompiled header) are made passable."""
        for path in filter(os.path.isdir, env.get("CPATH", "").split(os.pathsep)):
            _let_others_pass(path)
        for folder in self.hidden:
            close_to_others(folder)
        self.view = tempfile.mkdtemp(prefix="view_", dir=self.work)
        for path in (p for p in self.read_only if _under(p, self.hidden)):
            copy = self.view + path
            os.makedirs(os.path.dirname(copy), exist_ok=True)
            (shutil.copytree if os.path.isdir(path) else shutil.copyfile)(path, copy)
        for root, _, files in os.walk(self.view):
            os.chmod(root, 0o755)  # listable: Python's import system lists a folder before it opens a file
            for name in files:
                os.chmod(os.path.join(root, name), 0o644)
        _let_others_pass(self.view)

    def seen_as(self, path: str) -> str:
        """Where a run reads `path`: in uid mode, a file under a hidden folder is read from the
        grading's copy (`view`)."""
        real = os.path.realpath(path)
        return self.view + real if self.view and _under(real, self.hidden) else path

    def folder(self, parent: str, prefix: str) -> str:
        """A new folder under `parent` (the grading's own) that runs may write. mkdtemp names it:
        a folder made in advance under a predictable name cannot take its place."""
        path = tempfile.mkdtemp(prefix=prefix, dir=parent)
        os.makedirs(os.path.join(path, "tmp"))
        if self.uid is not None:
            _let_others_pass(parent)
        self.give(path)
        return path

    def give(self, path: str) -> None:
        """Hand a folder the grader filled (the submission's sources) to the sandbox uid."""
        if self.uid is None:
            return
        for root, dirs, files in os.walk(path):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                os.chown(name, self.uid, self.uid, follow_symlinks=False)

    # ---- running ----

    def start(
        self,
        argv: list[str],
        *,
        writable: list[str],
        cwd: str,
        env: dict,
        limits: Limits,
        jit_cache: str | None = None,
        ccache: bool = False,
        pass_fds: tuple[int, ...] = (),
    ) -> Run:
        """Start argv in the sandbox: `writable` folders (the first is HOME) are all it may write.
        `jit_cache`: a folder in one of them where Triton and inductor keep the kernels they
        compile, for every run given the same one; without it each run compiles them anew (in its
        HOME and TMPDIR), and a grader's own cache folders never reach a run. `ccache`: a build,
        which may use (and write) the shared ccache if there is one; no other run may. `pass_fds`:
        descriptors the run inherits (the observer's pipe); it gets no other of the grader's."""
        home = writable[0]
        run_env = scrubbed_env(env, home)
        if jit_cache:
            run_env.update(
                TRITON_CACHE_DIR=os.path.join(jit_cache, "triton"),
                TORCHINDUCTOR_CACHE_DIR=os.path.join(jit_cache, "inductor"),
            )
        shared_ccache = self.ccache_dir if ccache else None
        run_env.pop("CCACHE_DIR", None)
        if shared_ccache:  # read, never written: autograder/compiler_cache.py says who writes it
            run_env.update(
                CCACHE_DIR=shared_ccache, CCACHE_READONLY="1", CCACHE_TEMPDIR=os.path.join(home, ".ccache-tmp")
            )
        if not shared_ccache:
            run_env["CCACHE_DISABLE"] = "1"  # none to share (none in uid mode: Sandbox.open)
        command = argv
        if self.mode == "bwrap":
            command = self._bwrap(argv, writable, cwd, shared_ccache)
        own_uid = self.uid is not None

        def in_child() -> None:
            limits.apply(own_uid)
            if own_uid and self.mode == "uid":
                os.setgroups([])  # never the shared cache's group
                os.setgid(self.uid)
                os.setuid(self.uid)

        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=run_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=in_child,
            pass_fds=pass_fds,
        )
        return Run(self, process)

    def run(self, argv: list[str], *, timeout: float, **kwargs) -> tuple[int | None, str]:
        """Run to the end or for `timeout` seconds: (exit code or None when stopped, stdout + stderr)."""
        run = self.start(argv, **kwargs)
        code = run.wait(timeout)
        run.kill()
        return code, run.stdout() + run.stderr()

    def _bwrap(self, argv: list[str], writable: list[str], cwd: str, ccache_dir: str | None) -> list[str]:
        args = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev"]
        for node in sorted(glob.glob("/dev/nvidia*")):  # the GPU, when there is one
            args += ["--dev-bind", node, node]
        args += ["--proc", "/proc", *_tmpfs("/tmp", TMPFS_BYTES), *_tmpfs("/dev/shm", TMPFS_BYTES // 4)]
        home = os.path.realpath(os.path.expanduser("~"))
        if home != "/" and os.path.isdir(home):
            args += ["--tmpfs", home]  # the grader's own files (keys, tokens) are not there
        args += self._mounts(writable, hidden=("/tmp", home), read_only=(ccache_dir,) if ccache_dir else ())
        args += ["--chdir", cwd, "--die-with-parent", "--new-session"]
        if self.uid is None:
            return args + ["--unshare-all", "--", *argv]
        # As root, bwrap makes the namespaces (all but the user one, which would leave no uid to
        # switch to) and the command switches to the sandbox uid, with no capabilities left.
        groups = ["--clear-groups"]
        uid = str(self.uid)
        return [*args, *_AS_ROOT, "--", "setpriv", "--reuid", uid, "--regid", uid, *groups, *_NO_CAPS, "--", *argv]

    def _mounts(self, writable: list[str], hidden: tuple[str, ...], read_only: tuple[str, ...] = ()) -> list[str]:
        """bwrap's arguments for what the runs see of the folders `hidden` and self.hidden
        (emptied), for the `writable` ones and for `read_only` ones besides self.read_only,
        outer folders first."""
        emptied = self.hidden  # seen empty: what the runs need from them is bound back below
        shown = (*self.read_only, *(os.path.realpath(p) for p in read_only))
        binds = [(p, "--ro-bind") for p in shown if _under(p, hidden) or _under(p, emptied)]
        binds += [(p, "--tmpfs") for p in emptied]
        binds += [(os.path.realpath(p), "--bind") for p in writable]
        args, made, bound = [], set(), []
        for path, how in sorted(binds, key=lambda item: item[0].count(os.sep)):
            if how == "--tmpfs":
                args += ["--tmpfs", path]
                bound = [b for b in bound if not _under(b, (path,))]
                continue
            if how == "--ro-bind" and _under(path, tuple(bound)) and not _under(path, emptied):
                continue  # already there
            # bwrap would make the folders above a mount point in an empty /tmp, home or
            # emptied folder private (0700): made here, so that the sandbox uid may pass through them
            for above in _ancestors(path):
                in_emptied = _under(above, emptied) and above not in emptied
                in_hidden = _under(above, hidden) and above not in hidden and not _under(above, tuple(bound))
                if above not in made and (in_emptied or in_hidden):
                    args += ["--perms", "0755", "--dir", above]
                    made.add(above)
            args += [how, path, path]
            bound.append(path)
        return args

    # ---- ending ----

    def kill_all(self) -> None:
        """Every process of the sandbox uid (none left alive to write anything later)."""
        if self.uid is not None:
            kill_every_process_of(self.uid)

    def close(self) -> None:
        self.kill_all()
        if self.mode == "uid" and self._lock is not None:  # bwrap's /tmp and /dev/shm end with the run
            clean_up(self.uid, keep=(self.work,) if self.work else ())
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def describe(self) -> dict:
        return {"mode": self.mode, "uid": self.uid, "shared_ccache": bool(self.ccache_dir)}


def check_works(requested: str) -> None:
    """Raise SandboxError, naming the cure, unless a sandbox of mode `requested` works here:
    before a batch starts, rather than in each of its gradings."""
    with tempfile.TemporaryDirectory(prefix="sandbox_check_") as work:
        Sandbox.open(requested, work).close()


def python_command(*args: str) -> list[str]:
    """This Python, not putting the working folder on sys.path (the sandbox can write it)."""
    return [sys.executable, "-P", *args]


def _candidates(requested: str) -> list[tuple[str, bool]]:
    """(mode, with a uid of its own) to try, best first. As root, bwrap runs the command as a
    uid of its own; when that uid cannot read Python or the course (under root's home, say),
    plain bwrap still hides what it can."""
    root, bwrap = os.geteuid() == 0, shutil.which("bwrap") is not None
    choices = {
        "none": [("none", False)],
        "bwrap": [("bwrap", True)] * (root and bwrap) + [("bwrap", False)] * bwrap,
        "uid": [("uid", True)] * root,
        "auto": [("bwrap", True)] * (root and bwrap) + [("uid", True)] * root + [("bwrap", False)] * bwrap,
    }
    return choices[requested]


def cure(root: bool, bwrap: bool, needed: list[str]) -> str:
    """What would make a sandbox work on this machine, for the error saying none does. `needed`:
    what a run under a uid of its own must reach (this Python, its packages, the grader)."""
    install = "Install bubblewrap (apt-get install bubblewrap)."
    if not root:
        if not bwrap:
            return install + " Without it, only root can run student code as a uid of its own."
        return (
            "bubblewrap cannot make its namespaces here: allow unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 also "
            "kernel.apparmor_restrict_unprivileged_userns=0), or grade as root."
        )
    closed = [(path, folder) for path in needed if (folder := _first_closed_folder(path))]
    if closed:
        path, folder = closed[0]
        move = (
            f"The sandbox's uid cannot reach {path}: {folder} lets no other user pass. Move the virtual "
            f"environment (or Python) to a folder every user may pass, such as /opt, or let them pass "
            f"(chmod o+x {folder})."
        )
        return move + ("" if bwrap else " Or install bubblewrap (apt-get install bubblewrap).")
    if not bwrap:
        return install
    return "bubblewrap cannot make its namespaces here (in a container: allow them, e.g. with a seccomp profile)."


def _first_closed_folder(path: str) -> str | None:
    """The outermost folder on the way to `path`, as named, that other users may not pass, or None."""
    named = os.path.abspath(path)
    for folder in [*_ancestors(named), named] if os.path.isdir(named) else _ancestors(named):
        with contextlib.suppress(OSError):
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                return folder
    return None


def _paths_a_run_reads() -> list[str]:
    """What a run under a uid of its own reads first: this Python (as named and as resolved),
    its packages and the grader's."""
    import site

    return [sys.executable, os.path.realpath(sys.executable), sys.prefix, *site.getsitepackages(), PACKAGE_ROOT]


def _paths_runs_need(env: dict) -> list[str]:
    """What a run reads that may lie under a folder bwrap hides (/tmp, the grader's home)."""
    import site

    paths = [
        PACKAGE_ROOT,
        sys.prefix,
        sys.base_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        *site.getsitepackages(),
    ]
    for name in ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "CPATH"):  # CPATH: autograder/precompiled_header.py
        paths += [p for p in env.get(name, "").split(os.pathsep) if p]
    if env.get("CUDA_HOME"):
        paths.append(env["CUDA_HOME"])
    return paths


def _ancestors(path: str) -> list[str]:
    """The folders above `path`, outermost first."""
    above = []
    while os.path.dirname(path) != path:
        path = os.path.dirname(path)
        above.append(path)
    return above[::-1]


def _tmpfs(path: str, size: int) -> list[str]:
    """bwrap's arguments for an empty, world-writable (sticky) `path` of at most `size` bytes."""
    return ["--perms", "1777", "--size", str(size), "--tmpfs", path]


# As root: every namespace but the user one, and only the capabilities to switch uid.
_AS_ROOT = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
_AS_ROOT += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
_NO_CAPS = ["--inh-caps=-all", "--bounding-set=-all"]


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def close_to_others(folder: str) -> None:
    """No user but the owner and its group may read, write or pass `folder`; the sandboxes'
    uids are in neither (they have groups of their own, and at most the shared cache's)."""
    info = os.stat(folder)
    mode = stat.S_IMODE(info.st_mode) & ~0o007
    if info.st_gid == CCACHE_GID or info.st_gid in UID_RANGE:
        mode &= ~0o070
    if mode != stat.S_IMODE(info.st_mode):
        os.chmod(folder, mode)


def _let_others_pass(folder: str) -> None:
    """Let the sandbox uid pass through `folder` and every folder above it (search, not list):
    a run resolves absolute paths (compilers do), and one private folder on the way, such as a
    0700 temporary folder the grading was started in, would deny it every path below."""
    path = os.path.realpath(folder)
    while True:
        mode = os.stat(path).st_mode
        if not mode & stat.S_IXOTH:
            os.chmod(path, stat.S_IMODE(mode) | stat.S_IXOTH)
        if path == os.path.dirname(path):
            return
        path = os.path.dirname(path)
