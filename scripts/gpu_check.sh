#!/usr/bin/env bash
# On a machine with a GPU: the checks that CI cannot run, in stages; SELECT (suite) and UNITS
# (grade) cut a stage into shorter runs (a whole grading of day09 alone takes minutes).
#
#   scripts/gpu_check.sh suite [pytest args]   the test suite with its CUDA tests, notebooks and
#                                              GPU-only mutants (PYTEST_WORKERS, default 6; the
#                                              tests graded by timings run alone, first;
#                                              SELECT="a -k expression" to limit; a unit's GPU-only
#                                              mutants: SELECT="test_mutant_loses_exactly_its_tests
#                                              and day05" ... suite tests/test_autograder.py -m gpu;
#                                              WORKER_GPUS=0,1: each worker one of those GPUs, so that
#                                              gradings beside each other share none; tests needing
#                                              two GPUs then skip)
#   scripts/gpu_check.sh grade                 grade the reference solutions from cold builds
#                                              (UNITS="day05_layernorm_performance ..." to limit)
#   scripts/gpu_check.sh bench [NAME ...]      benchmarks: layernorm (rebuild-loop timing, the day05
#                                              table, BENCH_DTYPES default all three, and ncu) and
#                                              bias_gelu (day06 against eager and torch.compile) and
#                                              layernorm_package (day07 through autograd, and a
#                                              compiled block) and triton_basics (day08's vector
#                                              add and softmax) and rmsnorm_int8 (day09 against
#                                              the unfused code and F.rms_norm); default all five
#   scripts/gpu_check.sh class                 grade-all over a sample class (the reference and each
#                                              mutant, COPIES each, default 3; UNIT, default day02) on
#                                              GPUS (default all), confined to CORES (a taskset list)
#                                              where set; then the class check (OUT/class/, its
#                                              gradebook and grading_time.md)
#   scripts/gpu_check.sh notebook UNIT ...     run each unit's instructor notebook to its end and
#                                              keep every cell's output (OUT/notebook_UNIT.txt, and the
#                                              notebook with its outputs, OUT/UNIT.ipynb, to commit)
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
    for arg in "$@"; do
      if [ "$arg" = "-k" ] || [[ "$arg" == -k?* ]]; then
        echo "suite: pass SELECT=\"...\" instead of -k: a -k of its own would replace the stage's own selection" >&2
        exit 2
      fi
    done
    python3 -m course.authoring.generate --check 2>&1 | tee "$OUT/generate.txt"
    # Tests whose grade depends on timings run alone, first: parallel workers sharing the GPU
    # would skew the ratio to torch. SELECT="day05 or ..." limits both runs (a -k expression).
    # -v names each test as it ends: a run stopped at its time limit still says what passed.
    # The timer's own GPU tests calibrate a sleep kernel: another worker's kernels would skew it.
    timed='(test_reference_gets_full_marks and (day05 or day06 or day07 or day08 or day09)) or (test_solution_passes and _perf_) or naive_block_per_row or patches_the_timer or work_on_an_unwaited_stream or test_gpu_time_leaves_out or test_host_bound_call or test_work_left_on_another_stream or test_patching_torchs_timers or test_an_op_that_waits_for_the_gpu or test_an_op_whose_kernels_end or computes_otherwise_when_unprofiled'
    select="${SELECT:-test}"
    python3 -m pytest -v -ra -p no:cacheprovider -p no:benchmark -k "($select) and ($timed)" "$@" \
      2>&1 | tee "$OUT/pytest_timed.txt"
    workers=$(python3 -c 'import xdist' 2>/dev/null && echo "-n ${PYTEST_WORKERS:-6}" || echo "")
    # What needs no GPU (nvcc compile checks, generated files, tolerances judged on the CPU)
    # already runs in CI: leave it out here.
    cpu_only="--ignore=tests/test_tolerances.py --ignore=tests/test_generated.py --ignore=tests/test_regions.py --ignore=tests/test_row_plan.py"
    python3 -m pytest -v -ra -p no:cacheprovider -p no:benchmark $workers $cpu_only --durations=15 \
      -k "($select) and not ($timed) and not compiles_for_turing_and_hopper" "$@" \
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
    benches="${*:-layernorm bias_gelu layernorm_package triton_basics rmsnorm_int8}"
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
    [ $# -gt 0 ] || { echo "notebook: name one or more units, e.g. day05_layernorm_performance" >&2; exit 2; }
    status=0
    for unit in "$@"; do
      start=$(date +%s)
      python3 -m course.authoring.run_notebook "notebooks/instructor/$unit.ipynb" "/tmp/notebook_$unit" --fresh \
        --save "$OUT/$unit.ipynb" \
        > "$OUT/notebook_$unit.txt" 2>&1
      rc=$?
      [ $rc -eq 0 ] || status=1
      echo "$unit: exit $rc after $(( $(date +%s) - start )) s; last lines:"
      tail -n 5 "$OUT/notebook_$unit.txt"
    done
    exit $status
    ;;
  *)
    echo "unknown stage $stage: suite, grade, bench, class or notebook" >&2
    exit 2
    ;;
esac
