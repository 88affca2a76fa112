import os
import shutil
import tempfile

import pytest

# WORKER_GPUS="0,1" on a machine with several GPUs: each xdist worker sees one of them (worker
# gwN the Nth, round the list), so gradings side by side share neither a GPU nor its timings.
# Set before torch first asks the driver; tests that need two GPUs skip there.
if os.environ.get("WORKER_GPUS") and os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw"):
    _gpus = [gpu.strip() for gpu in os.environ["WORKER_GPUS"].split(",") if gpu.strip()]
    if not _gpus:
        raise ValueError(
            f"WORKER_GPUS={os.environ['WORKER_GPUS']!r}: expected GPU indices separated by commas, such as 0,1"
        )
    os.environ["CUDA_VISIBLE_DEVICES"] = _gpus[int(os.environ["PYTEST_XDIST_WORKER"][2:]) % len(_gpus)]

# Each xdist worker (and the children its gradings start) gets its share of the cores, as
# grade-all gives each grading: torch otherwise sizes its threads by the whole machine in every
# one of them (docs/performance.md, "The test suite").
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
if _workers > 1 and "OMP_NUM_THREADS" not in os.environ:
    from autograder.sandbox import CPUS  # imports no torch: the share is set before torch reads it

    os.environ["OMP_NUM_THREADS"] = str(max(1, CPUS // _workers))

import torch  # noqa: E402

# Builds need a CUDA toolkit even where there is no GPU; say which GPUs to build for.
if "CUDA_HOME" not in os.environ and os.path.isdir("/usr/local/cuda"):
    os.environ["CUDA_HOME"] = "/usr/local/cuda"
if "TORCH_CUDA_ARCH_LIST" not in os.environ:
    if torch.cuda.is_available():
        os.environ["TORCH_CUDA_ARCH_LIST"] = "{}.{}".format(*torch.cuda.get_device_capability())
    else:
        os.environ["TORCH_CUDA_ARCH_LIST"] = "7.5"

# The autograder's cache of built reference solutions: one for every run of the suite and
# every xdist worker (its entries are keyed by the grader's code and the solution files),
# rather than the grader's default under the home folder.
os.environ.setdefault("GRADER_REFERENCE_CACHE", os.path.join(tempfile.gettempdir(), "course-test-references"))

HAS_GPU = torch.cuda.is_available()
GPUS = torch.cuda.device_count() if HAS_GPU else 0


def absent(device: str) -> bool:
    """Whether this machine lacks the device a case runs on ("cuda:1" needs two GPUs)."""
    return device.startswith("cuda") and int(device.partition(":")[2] or 0) >= GPUS


def device_marks(device: str) -> list:
    """A GPU case's marks: `gpu`, and a skip where its GPU is not here (cuda:1 with one)."""
    marks = [pytest.mark.gpu] if device.startswith("cuda") else []
    if HAS_GPU and absent(device):
        marks.append(pytest.mark.skip(reason=f"needs {device}; {GPUS} GPU(s) here"))
    return marks


def pytest_configure(config):
    # A marker per unit (day01, day02, ...), from the unit folders: `-m day03` runs one unit.
    from course.spec import units

    for unit in units.all_units():
        config.addinivalue_line("markers", f"{unit.day}: the {unit.name} unit")
    config.pluginmanager.register(LongTestsFirst(), "long-tests-first")
    # Builds read precompiled headers where scripts/test.sh asks for them. Made once, by the
    # first process (xdist's workers start later and inherit CPATH), while the tests start.
    base = os.environ.get("COURSE_PRECOMPILED_HEADERS")
    if base and not hasattr(config, "workerinput"):
        from autograder import precompiled_header

        where, config.making_header = precompiled_header.start(base)
        if where:
            os.environ["CPATH"] = precompiled_header.on_cpath(where, os.environ.get("CPATH", ""))
    # The shared compiler cache, which the sandboxed builds only read, gets the units' own
    # files from trusted builds, in the background while the first tests run.
    if not hasattr(config, "workerinput") and "fast" not in (config.getoption("markexpr") or ""):
        from autograder import compiler_cache

        config.warming_cache = compiler_cache.start(os.path.join(tempfile.gettempdir(), "course-test-ccache-warm.log"))


def pytest_unconfigure(config):
    from autograder import compiler_cache, precompiled_header

    precompiled_header.stop(getattr(config, "making_header", None))
    compiler_cache.stop(getattr(config, "warming_cache", None))


# The edit-test loop (`scripts/test.sh -m fast`, under 3 minutes on 2 cores): the modules whose
# tests build and grade nothing, less any test of theirs that does (autograder, notebook, slow).
FAST_MODULES = {
    "test_answer_keys",
    "test_bench_unit",
    "test_class_cli",
    "test_class_inputs",
    "test_compiler_cache",
    "test_environment_file",
    "test_generated",
    "test_grade_stages",
    "test_gradebook_records",
    "test_hints",
    "test_hints_by_cause",
    "test_import_graph",
    "test_observer",
    "test_pacing",
    "test_regions",
    "test_release",
    "test_runtime_package",
    "test_student_path",
    "test_syllabus",
    "test_written_answers",
}


@pytest.hookimpl(tryfirst=True)  # before -m selects by the markers added here
def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    # `slow` tests run only where a -m expression names them (-m slow).
    skip_slow = (
        None if "slow" in (config.getoption("markexpr") or "") else pytest.mark.skip(reason="slow: -m slow runs it")
    )
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip)
        if "slow" in item.keywords and skip_slow:
            item.add_marker(skip_slow)
        slow_kinds = ("autograder", "notebook", "slow", "gpu")
        if item.module.__name__ in FAST_MODULES and not any(kind in item.keywords for kind in slow_kinds):
            item.add_marker(pytest.mark.fast)


# Tests that take minutes on 2 cores, longest first. Started late, one of them would end the run
# alone on a core: each heads a worker's first share instead (xdist's worksteal hands the
# workers contiguous shares of the collection, then steals from their ends). The first has a
# worker to itself.
LONG_TESTS = (
    "tests/test_gradescope.py::test_run_autograder_grades_an_upload_with_what_setup_installed",
    "tests/test_day09.py::test_reference_triton_kernels_compile_for_turing",
    "tests/test_student_path.py::test_the_student_path_passes",
    "tests/test_slurm.py::test_an_array_of_shards_then_one_merged_gradebook",
    "tests/test_unit_kinds.py::test_torch_ops_unit_rebuilds_three_times_in_one_process",
    "tests/test_batch.py::test_gradings_find_the_precompiled_header_where_one_is_asked_for",
)


class LongTestsFirst:
    """A plugin of its own: a module holds one hook of a name, and this one must run last."""

    @pytest.hookimpl(trylast=True)  # after -m and -k have deselected: the shares are of what runs
    def pytest_collection_modifyitems(self, config, items):
        workers = getattr(config, "workerinput", {}).get("workercount", 0)
        if workers >= 2:
            items[:] = long_tests_first(items, workers)


def long_tests_first(items: list, workers: int) -> list:
    """`items` reordered so that the LONG_TESTS head the workers' first shares: the first alone
    on worker 0, the others in turn on workers 1 and up."""
    rank = {
        item.nodeid: next((i for i, p in enumerate(LONG_TESTS) if item.nodeid.startswith(p)), None) for item in items
    }
    long = sorted((item for item in items if rank[item.nodeid] is not None), key=lambda item: rank[item.nodeid])
    if not long:
        return items
    heads = [long[:1]] + [long[1 + worker :: workers - 1] for worker in range(workers - 1)]
    rest = [item for item in items if rank[item.nodeid] is None]
    ordered, left = [], len(items)
    for worker in range(workers):
        share = left // (workers - worker)  # as worksteal sizes its first shares
        left -= share
        take = max(share - len(heads[worker]), 0)
        ordered += heads[worker] + rest[:take]
        rest = rest[take:]
    return ordered + rest


@pytest.fixture(scope="session")
def build_root(tmp_path_factory):
    """Where tests build units: one folder per session, shared by its xdist workers (each unit
    is built once, tests/helpers.py), laid out like the autograder's (src/ beside build/), so
    ccache, where set up, reuses its objects."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the session's, above the workers'
    folder = shared / "units"
    folder.mkdir(exist_ok=True)
    return str(folder)


@pytest.fixture(scope="session")
def nvcc():
    path = shutil.which("nvcc") or os.path.join(os.environ.get("CUDA_HOME", ""), "bin", "nvcc")
    if not os.path.exists(path):
        pytest.skip("nvcc not found")
    return path
