#!/usr/bin/env bash
# Profile the package's kernels with Nsight Compute: memory throughput and occupancy of each.
#     bench/run_ncu.sh [report name]     (writes <name>.ncu-rep; needs ncu and a GPU)
set -euo pipefail
cd "$(dirname "$0")"
ncu --kernel-name regex:layernorm --launch-count 8 \
    --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis \
    -o "${1:-fast_layernorm}" -f \
    python -c "
import torch, fast_layernorm
x = torch.randn(16384, 4096, device='cuda', requires_grad=True)
norm = fast_layernorm.LayerNorm(4096).cuda()
norm(x).sum().backward()
torch.cuda.synchronize()"
