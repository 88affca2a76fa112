"""The sandbox every build and test process of a grading runs in (autograder/sandbox.py): what
a run may write and read, its limits, its output, and nothing of it left once it ends."""

import json
import os
import shutil
import site
import tempfile

import pytest

from autograder.sandbox import OUTPUT_KEPT, Limits, Sandbox, SandboxError, _candidates, python_command
from autograder.uid_pool import take_uid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMITS = Limits(cpu_seconds=60)


@pytest.fixture
def sandbox(tmp_path):
    box = Sandbox.open("auto", str(tmp_path))
    yield box
    box.close()


def _run(sandbox, tmp_path, code: str, limits=LIMITS, timeout=60):
    folder = sandbox.folder(str(tmp_path), "run_")
    exit_code, output = sandbox.run(
        python_command("-c", code),
        timeout=timeout,
        writable=[folder],
        cwd=folder,
        env=dict(os.environ, GRADER_SECRET="hunter2"),
        limits=limits,
    )
    return exit_code, output, folder


def _alive(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def test_a_sandbox_is_found_and_none_only_when_asked(sandbox):
    assert sandbox.mode in ("bwrap", "uid")
    assert all(mode != "none" for mode, _ in _candidates("auto"))
    assert _candidates("none") == [("none", False)]
    with pytest.raises(ValueError, match="sandbox mode"):
        Sandbox.open("chroot", "/tmp")


def test_a_run_writes_only_its_folder_and_sees_no_secret(sandbox, tmp_path):
    targets = [
        os.path.join(REPO, "course", "planted.py"),
        os.path.join(site.getsitepackages()[0], "planted.pth"),
        str(tmp_path / "beside_the_run"),
        os.path.join(os.path.expanduser("~"), "planted"),
    ]
    code = f"""
import json, os
wrote = []
for path in {targets!r} + ["mine"]:
    try:
        open(path, "w").close()
        wrote.append(path)
    except OSError:
        pass
print(json.dumps({{"wrote": wrote, "env": dict(os.environ)}}))
"""
    exit_code, output, folder = _run(sandbox, tmp_path, code)
    assert exit_code == 0, output
    seen = json.loads(output.strip().splitlines()[-1])
    assert seen["wrote"] == ["mine"] and os.path.exists(os.path.join(folder, "mine"))
    assert "GRADER_SECRET" not in seen["env"] and seen["env"]["HOME"] == folder
    assert not any(os.path.exists(path) for path in targets)


def test_runs_given_one_jit_cache_share_it_and_others_keep_their_own(sandbox, tmp_path):
    """Triton's and inductor's caches: in the folder the runs of one submission are given, else in
    the run's own HOME and TMPDIR; the grader's own cache folders never reach a run."""
    shared = sandbox.folder(str(tmp_path), "build_")
    code = """
import json, os, uuid
folder = os.environ.get("TRITON_CACHE_DIR", os.path.join(os.environ["HOME"], ".triton", "cache"))
os.makedirs(folder, exist_ok=True)
open(os.path.join(folder, uuid.uuid4().hex), "w").close()  # a pid would repeat: each bwrap run is pid 2
print(json.dumps({"triton": folder, "inductor": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
                  "kernels": len(os.listdir(folder))}))
"""
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "graders"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "g2"))

    def run(jit_cache):
        folder = sandbox.folder(str(tmp_path), "run_")
        exit_code, output = sandbox.run(
            python_command("-c", code),
            timeout=60,
            writable=[folder, shared],
            cwd=folder,
            env=env,
            limits=LIMITS,
            jit_cache=jit_cache,
        )
        assert exit_code == 0, output
        return folder, json.loads(output.strip().splitlines()[-1])

    cache = os.path.join(shared, "jit")
    seen = [run(cache)[1] for _ in range(2)]
    assert [s["kernels"] for s in seen] == [1, 2]  # the second run found the first one's
    assert seen[1]["triton"] == os.path.join(cache, "triton") and seen[1]["inductor"] == os.path.join(cache, "inductor")
    folder, alone = run(None)
    assert alone["kernels"] == 1 and alone["triton"].startswith(folder) and alone["inductor"] is None
    assert not os.path.exists(tmp_path / "graders")


@pytest.mark.parametrize("mode", ["auto", "uid"])
def test_runs_read_the_folders_on_cpath_and_cannot_write_them(tmp_path, mode):
    """The precompiled header's folder (autograder/precompiled_header.py) reaches a build
    through CPATH, read-only, though a bwrap run sees the temporary folder empty and a uid run
    (a GPU machine without bubblewrap) may not enter the grader's private folders."""
    headers = tmp_path / "headers"
    (headers / "ATen").mkdir(parents=True)
    (headers / "ATen" / "ATen.h.gch").write_text("made by the grader")
    env = dict(os.environ, CPATH=str(headers))
    try:
        box = Sandbox.open(mode, str(tmp_path), env=env)
    except SandboxError as error:
        if mode == "uid":  # not root, or Python under a private home: runs here use bwrap
            pytest.skip(f"no uid sandbox on this machine: {error}")
        raise
    code = """
import json, os
path = os.path.join(os.environ["CPATH"], "ATen", "ATen.h.gch")
try:
    open(path, "a").close()
    wrote = True
except OSError:
    wrote = False
print(json.dumps({"read": open(path).read(), "wrote": wrote}))
"""
    assert _last_json_of_a_build(box, tmp_path, code, env) == {"read": "made by the grader", "wrote": False}


def _last_json_of_a_build(box, tmp_path, code: str, env: dict) -> dict:
    """The last line of what `code` printed, run as a build (ccache=True) in `box`, then closed."""
    try:
        folder = box.folder(str(tmp_path), "build_")
        exit_code, output = box.run(
            python_command("-c", code), timeout=60, writable=[folder], cwd=folder, env=env, limits=LIMITS, ccache=True
        )
    finally:
        box.close()
    assert exit_code == 0, output
    return json.loads(output.strip().splitlines()[-1])


def test_processes_a_run_leaves_are_killed(sandbox, tmp_path):
    folder = sandbox.folder(str(tmp_path), "run_")
    # a detached grandchild (new session, double fork) and a plain child, both outliving the run
    exit_code, output = sandbox.run(
        ["sh", "-c", "(setsid sleep 301.5 &); sleep 302.5 & echo started"],
        timeout=30,
        writable=[folder],
        cwd=folder,
        env=dict(os.environ),
        limits=LIMITS,
    )
    assert exit_code == 0 and "started" in output
    assert _alive("301.5") == [] and _alive("302.5") == []
    run = sandbox.start(
        ["sh", "-c", "(setsid sleep 303.5 &); sleep 304.5"],
        writable=[folder],
        cwd=folder,
        env=dict(os.environ),
        limits=LIMITS,
    )
    assert run.wait(1) is None  # still running: stopped, with all it started
    assert _alive("303.5") == [] and _alive("304.5") == []


def test_output_is_capped_in_memory(sandbox, tmp_path):
    code = "import sys\nfor _ in range(50): sys.stdout.write('x' * (1 << 20))"
    exit_code, output, folder = _run(sandbox, tmp_path, code)
    assert exit_code == 0
    assert len(output) < 3 * OUTPUT_KEPT and "bytes left out" in output
    assert sum(len(files) for _, _, files in os.walk(folder)) == 0  # nothing of it on disk


def test_memory_beyond_the_limit_cannot_be_had(sandbox, tmp_path):
    exit_code, output, _ = _run(sandbox, tmp_path, "bytearray(20 << 30)")
    assert exit_code == 1 and "MemoryError" in output


def test_cpu_time_and_file_size_are_limited(sandbox, tmp_path):
    exit_code, _, _ = _run(sandbox, tmp_path, "while True: pass", limits=Limits(cpu_seconds=1), timeout=30)
    assert exit_code is not None and exit_code < 0  # SIGXCPU, then SIGKILL at the hard limit
    exit_code, output, _ = _run(
        sandbox, tmp_path, "open('big', 'wb').write(bytes(2 << 20))", limits=Limits(cpu_seconds=60, file_bytes=1 << 20)
    )
    assert exit_code == 1 and "File too large" in output


def test_processes_are_limited_with_a_uid_of_its_own(sandbox, tmp_path):
    if sandbox.uid is None:
        pytest.skip("the sandbox runs as the grader's own user here: no process limit of its own")
    folder = sandbox.folder(str(tmp_path), "run_")
    exit_code, output = sandbox.run(
        ["sh", "-c", "for i in $(seq 50); do sleep 5 & done; wait"],
        timeout=30,
        writable=[folder],
        cwd=folder,
        env=dict(os.environ),
        limits=Limits(cpu_seconds=60, processes=20),
    )
    assert "fork" in output.lower(), output


def test_no_network_in_bwrap(sandbox, tmp_path):
    if sandbox.mode != "bwrap":
        pytest.skip("only bubblewrap takes the network away")
    code = (
        "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=3)\n    print('connected')\n"
        "except OSError as error:\n    print(error)"
    )
    exit_code, output, _ = _run(sandbox, tmp_path, code)
    assert exit_code == 0 and "connected" not in output and "unreachable" in output.lower()


def test_uid_mode_runs_as_a_uid_of_its_own_and_kills_all_its_processes(tmp_path):
    """Without Python (the uid may not be able to read it here, under root's home)."""
    if os.geteuid() != 0:
        pytest.skip("a uid of its own needs a root grader")
    uid, lock = take_uid()
    box = Sandbox("uid", uid, _lock=lock)
    try:
        folder = box.folder(str(tmp_path), "run_")
        exit_code, output = box.run(
            ["sh", "-c", "id -u; (setsid sleep 305.5 &); touch mine; touch ../theirs"],
            timeout=30,
            writable=[folder],
            cwd=folder,
            env=dict(os.environ),
            limits=LIMITS,
        )
        assert exit_code != 0 and output.split()[0] == str(uid) != str(os.getuid())
        assert os.path.exists(os.path.join(folder, "mine")) and not os.path.exists(tmp_path / "theirs")
        assert _alive("305.5") == []
    finally:
        box.close()


def test_processes_of_a_killed_grader_end_when_the_next_uid_is_taken(tmp_path):
    """A grader killed outright (SIGKILL) ends none of its sandbox's processes, and its uid's
    lock goes with it: the next grading to take a uid, any uid, ends them first (uids are
    handed out in turn, so that one may not come round again for many gradings)."""
    if os.geteuid() != 0:
        pytest.skip("a uid of its own needs a root grader")
    uid, lock = take_uid()
    box = Sandbox("uid", uid, _lock=lock)
    taken = (None, None)
    try:
        folder = box.folder(str(tmp_path), "run_")
        run = box.start(
            ["sh", "-c", "(setsid sleep 306.5 &)"], writable=[folder], cwd=folder, env=dict(os.environ), limits=LIMITS
        )
        run.process.wait()
        # Asked while the lock is held: once it goes, another worker's grading may take a uid
        # and end the sleep first, as it should.
        assert _alive("306.5")
        lock.close()  # its grader is gone, and never ended the sleep
        taken = take_uid()
        assert taken[0] != uid and _alive("306.5") == []
    finally:
        box.close()
        if taken[1]:
            taken[1].close()


def test_bwrap_runs_see_of_the_solutions_only_the_suites(tmp_path):
    """The course's solutions hold what students must never read: reference sources, answer keys,
    mutants, the hidden cases. A bwrap run sees their folder empty but for the suite files a
    child imports: the public suite and the shared pieces."""
    from autograder.suite_access import suite_files
    from course.spec import units

    unit = units.load("day01_relu_bias")
    box = Sandbox.open("auto", str(tmp_path), read_only=suite_files(unit), hidden=[unit.solutions])
    try:
        if box.mode != "bwrap":
            pytest.skip("only bubblewrap can hide files any user may read")
        secret = [
            os.path.join(unit.folder, name)
            for name in ("answers.md", "mutants.toml", "relu_bias.cu", "hidden_tests.py")
        ]
        secret.append(os.path.join(unit.solutions, "day05_layernorm_performance", "hidden_tests.py"))
        code = f"""
import json, os
def readable(path):
    try:
        open(path).read()
        return True
    except OSError:
        return False
print(json.dumps({{"secret": [p for p in {secret!r} if readable(p)],
                   "suites": [p for p in {suite_files(unit)!r} if readable(p)],
                   "listed": sorted(os.listdir({unit.folder!r}))}}))
"""
        exit_code, output, _ = _run(box, tmp_path, code)
        assert exit_code == 0, output
        seen = json.loads(output.strip().splitlines()[-1])
        assert all(os.path.exists(p) for p in secret)  # they are there, for the grader
        assert seen["secret"] == [] and seen["suites"] == suite_files(unit), seen
        assert seen["listed"] == ["public_tests.py"], seen
    finally:
        box.close()


def test_a_child_runs_any_hidden_case_from_the_public_suite_and_the_case_as_data(tmp_path):
    """The child never imports the hidden suite: what it calls (the ops, torch's baseline, the
    layouts made on the device) must all come from the public one, and each case crosses as
    data. An error case's spoilers cross as code, and spoil its arguments as before."""
    import torch

    from autograder.runner import case_from_data, runnable_case
    from course.cases import make_input_sets
    from course.spec import units

    for unit in (u for u in units.all_units() if u.has_tests()):
        public, hidden = unit.tests(hidden=False), unit.tests(hidden=True)
        for name in ("OPS", "baseline", "on_device"):
            assert getattr(hidden, name, None) is getattr(public, name, None), f"{unit.name}: hidden {name}"
        for case in hidden.CASES:
            path = tmp_path / "case.pt"
            torch.save(runnable_case(case), path)
            runs = case_from_data(torch.load(path, weights_only=False))
            kept = ("device", "points", "kind", "checks", "timeout")  # not its name or group: the child needs neither
            assert all(getattr(runs, f) == getattr(case, f) for f in kept), f"{unit.name}: {case.name}"
            assert not runs.hint and not runs.error_words and not runs.error_arguments and not runs.needs
            spoilers = case.params.get("bad")
            assert {k: v for k, v in runs.params.items() if k != "bad"} == {
                k: v for k, v in case.params.items() if k != "bad"
            }
            if not isinstance(spoilers, dict):
                assert runs.params.get("bad") == spoilers
                continue
            inputs = make_input_sets(hidden, case, seed=0)[0]
            for name, spoil in spoilers.items():
                again = runs.params["bad"][name](inputs[name])
                want = spoil(inputs[name])
                same = (
                    torch.equal(again, want) and again.stride() == want.stride()
                    if isinstance(want, torch.Tensor)
                    else again == want or again != again and want != want
                )
                assert same, f"{unit.name}: {case.name}: {name}"


def test_bwrap_runs_cannot_reach_a_batchs_gpu_locks(tmp_path):
    """A run of the grader's own uid (bwrap without root) could otherwise open a lock file and
    hold it, so that another grading's perf cases wait out their time. /var/tmp, because bwrap
    hides all of /tmp anyway."""
    from autograder.gpu_lock import GpuLock
    from autograder.suite_access import hidden_from_runs
    from course.spec import units

    if not os.path.isdir("/var/tmp"):
        pytest.skip("no /var/tmp")
    locks = tempfile.mkdtemp(prefix="gpu-locks-", dir="/var/tmp")
    try:
        lock = GpuLock(os.path.join(locks, "gpu0"))
        lock.acquire(False, lambda: False).release()  # its files exist
        box = Sandbox.open("auto", str(tmp_path), hidden=hidden_from_runs(units.load("day01_relu_bias"), lock.path))
        try:
            if box.mode != "bwrap":
                pytest.skip("only bubblewrap can hide files any user may read")
            code = f"import os; print(sorted(os.listdir({locks!r})))"
            exit_code, output, _ = _run(box, tmp_path, code)
            assert exit_code == 0 and output.strip().splitlines()[-1] == "[]", output
            assert sorted(os.listdir(locks)) == ["gpu0.lock", "gpu0.turnstile"]  # there, for the grader
        finally:
            box.close()
    finally:
        shutil.rmtree(locks, ignore_errors=True)


def test_a_build_reads_the_shared_compiler_cache_and_cannot_write_it(tmp_path):
    """An entry a submission's build could write under the key of a classmate's unchanged file
    would become that classmate's object code: the cache is read-only to every build
    (autograder/compiler_cache.py fills it from the course's own code)."""
    cache = tmp_path / "ccache"
    cache.mkdir()
    (cache / "entry").write_text("compiled by the grader")
    env = dict(os.environ, CCACHE_DIR=str(cache))
    env.pop("CCACHE_DISABLE", None)
    box = Sandbox.open("auto", str(tmp_path), env=env)
    code = """
import json, os
entry = os.path.join(os.environ["CCACHE_DIR"], "entry")
wrote = []
for path in (entry, os.path.join(os.environ["CCACHE_DIR"], "planted"), os.path.join(os.environ["CCACHE_DIR"], "ccache.conf")):
    try:
        open(path, "a").close()
        wrote.append(path)
    except OSError:
        pass
print(json.dumps({"read": open(entry).read(), "wrote": wrote, "readonly": os.environ.get("CCACHE_READONLY"),
                  "disabled": os.environ.get("CCACHE_DISABLE")}))
"""
    seen = _last_json_of_a_build(box, tmp_path, code, env)
    assert seen["wrote"] == [] and not (cache / "planted").exists()
    if box.mode == "bwrap":  # the uid fallback shares no cache at all
        assert seen == {"read": "compiled by the grader", "wrote": [], "readonly": "1", "disabled": None}
    else:
        assert seen["disabled"] == "1"
