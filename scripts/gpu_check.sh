#!/usr/bin/env bash
# On a machine with a GPU, in one go: the whole test suite with the CUDA tests,
# notebooks and GPU-only mutants; grading the reference solutions from a cold
# build; the rebuild loop's timing; the day02 benchmark. Ends with a summary.
#
#   scripts/gpu_check.sh [pytest args]   (OUT=folder keeps logs, default /tmp/gpu_check;
#                                         UNITS="day02_layernorm_forward ..." limits the grading)
# Wheels in .whl/ (nbclient, nbformat, ipykernel and their needs) are installed
# first where the machine cannot reach a package index.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu_check}"
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null
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

python3 -m course.generate --check 2>&1 | tee "$OUT/generate.txt"
start=$(date +%s)
python3 -m autograder reference $(for u in ${UNITS:-}; do echo --unit "$u"; done) --out "$OUT/reference" 2>&1 | tee "$OUT/reference.txt"
reference_s=$(( $(date +%s) - start ))

workers=$(python3 -c 'import xdist' 2>/dev/null && echo "-n ${PYTEST_WORKERS:-6}" || echo "")
python3 -m pytest -q -ra $workers --junitxml="$OUT/pytest.xml" "$@" 2>&1 | tee "$OUT/pytest.txt"
python3 bench/rebuild_time.py 2>&1 | tee "$OUT/rebuild.txt"
python3 bench/layernorm_forward.py 2>&1 | tee "$OUT/bench.txt"

echo
echo "================ GPU check summary ================"
cat "$OUT/gpu.txt"
echo "reference grading (all units, cold builds): ${reference_s} s"
grep -E "points|timings" "$OUT/reference.txt"
grep -E "^(FAILED|ERROR)" "$OUT/pytest.txt" | head -20
tail -1 "$OUT/pytest.txt"
grep -E "^rebuild" "$OUT/rebuild.txt"
cat "$OUT/bench.txt" | grep -v "^W"
