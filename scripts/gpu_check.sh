#!/usr/bin/env bash
# On a machine with a GPU: the checks that CI cannot run, in stages; SELECT (suite) and UNITS
# (grade) cut a stage into shorter runs (a whole grading of day09 alone takes minutes).
#
#   scripts/gpu_check.sh suite [pytest args]   the test suite with its CUDA tests, notebooks and
#                                              GPU-only mutants (PYTEST_WORKERS, default 6; the
#                                              tests marked `timed` run alone, first;
#                                              SELECT="a -k expression" to limit; a unit's GPU-only
#                                              mutants: SELECT="test_mutant_loses_exactly_its_tests
#                                              and day05" ... suite tests/test_autograder.py -m gpu;
#                                              WORKER_GPUS=0,1: each worker one of those GPUs, so that
#                                              gradings beside each other share none; tests needing
#                                              two GPUs then skip)
#   scripts/gpu_check.sh grade                 grade the reference solutions from cold builds
#                                              (UNITS="day05_layernorm_performance ..." to limit)
#   scripts/gpu_check.sh bench [NAME ...]      benchmarks: units (each unit's perf cases as its suite
#                                              declares them, bench/unit.py) and layernorm
#                                              (rebuild-loop timing, the day05 table, BENCH_DTYPES
#                                              default all three, and ncu) and bias_gelu (day06
#                                              against eager and torch.compile) and
#                                              layernorm_package (day07 through autograd, and a
#                                              compiled block) and triton_basics (day08's vector
#                                              add and softmax) and rmsnorm_int8 (day09 against
#                                              the unfused code and F.rms_norm); default all six
#   scripts/gpu_check.sh class                 grade-all over a sample class (the reference and each
#                                              mutant, COPIES each, default 3; UNIT, default day02) on
#                                              GPUS (default all), confined to CORES (a taskset list)
#                                              where set; then the class check (OUT/class/, its
#                                              gradebook and grading_time.md)
#   scripts/gpu_check.sh notebook UNIT ...     each unit's notebooks with the runtime installed from a
#                                              local release: the instructor's to its end, every cell's
#                                              output kept (OUT/notebook_UNIT.txt, OUT/UNIT.ipynb to
#                                              commit); the student's to its TODO messages
#                                              (OUT/student_UNIT.txt)
#   scripts/gpu_check.sh observer              the observer (autograder/observer/): its build, a bare
#                                              child's raw records, day05's and day09's perf case
#                                              graded under it (kernels seen, busy time against the
#                                              child's own report, its cost), tests/test_observer.py
#                                              (scripts/observer_check.py; OUT/observer.txt)
#   scripts/gpu_check.sh student UNIT ...      the student path of each unit (scripts/student_path.sh):
#                                              its release notebook solved, run and its zip graded,
#                                              every test to pass (OUT/student/summary.md); T4=1
#                                              plays Colab's T4 (sm_75 code alone, the notebook on
#                                              2 cores, 15 GiB of GPU memory)
#
# OUT=folder keeps the logs (default /tmp/gpu_check). Wheels in .whl/ (nbclient, nbformat,
# ipykernel and their needs) are installed first where no package index can be reached.
set -uo pipefail
cd "$(dirname "$0")/.."
stage="${1:-suite}"
shift || true
OUT="${OUT:-/tmp/gpu_check}"
mkdir -p "$OUT"
if [ -d .whl ]; then
  # Once per machine: a second stage on the same machine finds them installed.
  [ -f /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
    .whl/*.whl >/dev/null && touch /tmp/site/.installed; }
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
# Where g++ links libstdc++ statically into shared objects, each extension carries its own
# copy, never initialized, and its first number printed to a stream (any TORCH_CHECK message
# with a size in it) segfaults. Let the shared libstdc++ win symbol lookup.
libstdcxx="$(g++ -print-file-name=libstdc++.so.6)"
[ -f "$libstdcxx" ] && export LD_PRELOAD="$libstdcxx${LD_PRELOAD:+:$LD_PRELOAD}"
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$(python3 -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())')}"
export PYTHONUNBUFFERED=1 MAX_JOBS="${MAX_JOBS:-8}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' | tee -a "$OUT/gpu.txt"

case "$stage" in
  suite)
    # A -m of the caller's joins the stage's own (pytest keeps only the last -m it is given).
    marks="" args=()
    while [ $# -gt 0 ]; do
      case "$1" in
        -k|-k?*)
          echo "suite: pass SELECT=\"...\" instead of -k: a -k of its own would replace the stage's own selection" >&2
          exit 2 ;;
        -m) [ $# -ge 2 ] || { echo "suite: -m needs a marker expression" >&2; exit 2; }
            marks="${marks:+$marks and }($2)"; shift 2 ;;
        -m?*) marks="${marks:+$marks and }(${1#-m})"; shift ;;
        *) args+=("$1"); shift ;;
      esac
    done
    set -- "${args[@]+"${args[@]}"}"
    python3 -m course.authoring.generate --check 2>&1 | tee "$OUT/generate.txt"
    # Tests whose grade depends on timings (marked `timed` where they are defined) run alone,
    # first: parallel workers sharing the GPU would skew the ratio to torch, and the timer's own
    # GPU tests calibrate a sleep kernel that another worker's kernels would skew.
    # SELECT="day05 or ..." limits both runs (a -k expression).
    # -v names each test as it ends: a run stopped at its time limit still says what passed.
    select="${SELECT:-test}"
    python3 -m pytest -v -ra -p no:cacheprovider -p no:benchmark -m "${marks:+$marks and }timed" -k "$select" "$@" \
      2>&1 | tee "$OUT/pytest_timed.txt"
    workers=$(python3 -c 'import xdist' 2>/dev/null && echo "-n ${PYTEST_WORKERS:-6}" || echo "")
    # What needs no GPU (nvcc compile checks, generated files, tolerances judged on the CPU)
    # already runs in CI: leave it out here.
    cpu_only="--ignore=tests/test_tolerances.py --ignore=tests/test_generated.py --ignore=tests/test_regions.py --ignore=tests/test_row_plan.py"
    python3 -m pytest -v -ra -p no:cacheprovider -p no:benchmark $workers $cpu_only --durations=15 \
      -m "${marks:+$marks and }not timed" -k "($select) and not compiles_for_turing_and_hopper" "$@" \
      2>&1 | tee "$OUT/pytest.txt"
    echo "================ suite summary ================"
    grep -hE "^(FAILED|ERROR)" "$OUT/pytest.txt" "$OUT/pytest_timed.txt" | head -40
    tail -qn1 "$OUT/pytest.txt" "$OUT/pytest_timed.txt"
    ;;
  grade)
    start=$(date +%s)
    # --sandbox auto: graded as a submission is (reference alone runs the course's code unconfined)
    python3 -m autograder reference $(for u in ${UNITS:-}; do echo --unit "$u"; done) --out "$OUT/reference" \
      --sandbox auto 2>&1 | tee "$OUT/reference.txt"
    echo "================ grading summary ================"
    echo "reference grading (cold builds): $(( $(date +%s) - start )) s"
    grep -E "points|timings" "$OUT/reference.txt"
    ;;
  bench)
    benches="${*:-units layernorm bias_gelu layernorm_package triton_basics rmsnorm_int8}"
    if [[ " $benches " == *" units "* ]]; then
      for unit in $(python3 -c 'from course.spec import units
print(" ".join(u.name for u in units.all_units() if u.has_tests() and any(c.kind == "perf" for c in u.tests(hidden=True).CASES)))'); do
        python3 bench/unit.py "$unit" --markdown "$OUT/unit_$unit.md" 2>&1 | grep -v "^W" | tee "$OUT/unit_$unit.txt"
      done
    fi
    if [[ " $benches " == *" layernorm "* ]]; then
      python3 bench/rebuild_time.py --unit day05_layernorm_performance 2>&1 | tee "$OUT/rebuild.txt"
      python3 bench/layernorm.py --dtypes ${BENCH_DTYPES:-float32 float16 bfloat16} --markdown "$OUT/performance.md" \
        2>&1 | grep -v "^W" | tee "$OUT/bench.txt"
      python3 bench/profile_layernorm.py 2>&1 | tee "$OUT/ncu.txt" | grep -E "layernorm|param|partials|duration|throughput|bytes|warps|registers" | head -80
    fi
    if [[ " $benches " == *" bias_gelu "* ]]; then
      python3 bench/bias_gelu.py --markdown "$OUT/bias_gelu.md" 2>&1 | grep -v "^W" | tee "$OUT/bias_gelu.txt"
    fi
    if [[ " $benches " == *" layernorm_package "* ]]; then
      python3 bench/layernorm_package.py --markdown "$OUT/layernorm_package.md" 2>&1 | grep -v "^W" \
        | tee "$OUT/layernorm_package.txt"
    fi
    if [[ " $benches " == *" triton_basics "* ]]; then
      python3 bench/triton_basics.py --markdown "$OUT/triton_basics.md" 2>&1 | grep -v "^W" | tee "$OUT/triton_basics.txt"
    fi
    if [[ " $benches " == *" rmsnorm_int8 "* ]]; then
      python3 bench/rmsnorm_int8.py --markdown "$OUT/rmsnorm_int8.md" 2>&1 | grep -v "^W" | tee "$OUT/rmsnorm_int8.txt"
    fi
    ;;
  class)
    unit="${UNIT:-day02_layernorm_forward}"
    submissions="$(mktemp -d)"
    python3 -m autograder.sample_class "$unit" "$submissions/class" --copies "${COPIES:-3}"
    rm -rf "$OUT/class"  # a class graded here before would be passed over as unchanged, and timed as such
    # Whether more cores are more cores: hyperthreads share one core's units.
    lscpu | grep -E "^(CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)):" | tee -a "$OUT/gpu.txt"
    # grade-all bounds its compilers by MemAvailable: a VM whose memory grows on use reports less.
    grep -E "^Mem(Total|Available):" /proc/meminfo | tee -a "$OUT/gpu.txt"
    start=$(date +%s)
    # A smaller machine's share of the cores: grade-all sizes its batch by the cores it may use.
    ${CORES:+taskset -c $CORES} python3 -m autograder grade-all "$submissions/class" --unit "$unit" \
      --out "$OUT/class" --gpus "${GPUS:-all}" 2>&1 | tr '\r' '\n' > "$OUT/grade_all.txt"
    echo "================ class summary ================"
    grep -m1 "^grading " "$OUT/grade_all.txt"  # its plan: gradings at once, compilers each
    grep -v '^\[' "$OUT/grade_all.txt" | tail -n 5
    echo "grade-all: $(( $(date +%s) - start )) s (GPUS=${GPUS:-all} CORES=${CORES:-all} COPIES=${COPIES:-3})"
    python3 -m autograder.sample_class "$unit" "$submissions/class" --check "$OUT/class"
    status=$?
    head -n 25 "$OUT/class/grading_time.md"
    rm -rf "$submissions"
    exit $status
    ;;
  notebook)
    # As in Colab: each notebook installs the runtime from a release (here a local one), not
    # from this checkout. The instructor notebook runs to its end (its outputs kept, to commit);
    # the student notebook stops at the public tests with its TODO messages.
    [ $# -gt 0 ] || { echo "notebook: name one or more units, e.g. day05_layernorm_performance" >&2; exit 2; }
    release="$(mktemp -d)/students"
    python3 -m course.authoring.release "$release" $(for u in "$@"; do echo --unit "$u"; done) >/dev/null || exit 1
    export COURSE_RELEASE="$release/runtime"
    status=0
    for unit in "$@"; do
      start=$(date +%s)
      python3 -m course.authoring.run_notebook "notebooks/instructor/$unit.ipynb" "/tmp/notebook_$unit" --fresh \
        --save "$OUT/$unit.ipynb" > "$OUT/notebook_$unit.txt" 2>&1
      rc=$?
      [ $rc -eq 0 ] || status=1
      echo "$unit (instructor): exit $rc after $(( $(date +%s) - start )) s; last lines:"
      tail -n 4 "$OUT/notebook_$unit.txt"
      start=$(date +%s)
      python3 -m course.authoring.run_notebook "$release/notebooks/$unit.ipynb" "/tmp/student_$unit" --fresh \
        > "$OUT/student_$unit.txt" 2>&1
      day="${unit%%_*}"
      if grep -q "PublicTestsFailed" "$OUT/student_$unit.txt" && grep -q "TODO($day)" "$OUT/student_$unit.txt" \
         && grep -q "course runtime" "$OUT/student_$unit.txt"; then verdict="stops at its TODO messages"
      else verdict="DID NOT stop at its TODO messages"; status=1; fi
      echo "$unit (student): $verdict after $(( $(date +%s) - start )) s"
    done
    exit $status
    ;;
  observer)
    python3 scripts/observer_check.py "$@" 2>&1 | tee "$OUT/observer.txt"
    exit "${PIPESTATUS[0]}"
    ;;
  student)
    [ $# -gt 0 ] || { echo "student: name one or more units, e.g. day02_layernorm_forward" >&2; exit 2; }
    scripts/student_path.sh "$@" --out "$OUT/student" ${T4:+--t4}
    ;;
  *)
    echo "unknown stage $stage: suite, grade, bench, class, notebook, observer or student" >&2
    exit 2
    ;;
esac
