// LayerNorm forward, version 2: one warp per row.
//
// Version 1 (day04) gives every row a block of 256 threads. At D = 7 that is 249 idle threads
// per row; at any D each sum is a block reduction with two __syncthreads, and a block of 256
// threads waits for its slowest warp. Here the 32 lanes of a warp own a row, and a block holds
// kRowsPerBlock rows. A row's sums are five shuffles (warp_reduce_sum), with no shared memory
// and no barrier, and warps never wait for each other.
//
// The math is version 1's: mean = Σx / D, var = Σ(x − mean)² / D, y = (x − mean)·rstd·γ + β,
// every sum in acc_t.
#include "course_todo.h"
#include "device_math.cuh"
#include "layernorm_fast.h"
#include "reductions.cuh"

namespace {

COURSE_TODO("day05: layernorm_forward_warp.cu, layernorm_forward_warp_kernel: a warp per row, the block's shape and the grid yours to choose, every row covered, then delete this line");
template <typename T>
__global__ void layernorm_forward_warp_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                              const T* __restrict__ beta, T* __restrict__ y,
                                              acc_type_t<T>* __restrict__ mean_out,
                                              acc_type_t<T>* __restrict__ rstd_out, int64_t rows,
                                              int cols, acc_type_t<T> eps) {
  using acc_t = acc_type_t<T>;
  // TODO(day05): version 1's math with a warp in place of the block: two passes for the
  // variance (the mean first), every sum in acc_t, warp_reduce_sum (reductions.cuh) in place of
  // block_reduce_sum. Yours to decide: how many warps (so rows) a block holds, and which warp
  // takes which row. What must hold:
  //   - every row is done by exactly one warp, whatever grid the launcher below starts: if the
  //     grid can hold fewer warps than there are rows, a warp goes on to further rows;
  //   - the 32 lanes of a warp run the same rows and leave the loop together: warp_reduce_sum's
  //     full-mask shuffles need every lane present;
  //   - inside a row, neighbouring lanes read neighbouring elements (a warp-wide read is then
  //     one coalesced transaction), up to j < cols for any cols, 1 included;
  //   - one lane of the warp writes mean_out[row] and rstd_out[row].
}

}  // namespace

template <typename T>
cudaError_t launch_layernorm_forward_warp(const T* x, const T* gamma, const T* beta, T* y,
                                          acc_type_t<T>* mean, acc_type_t<T>* rstd, int64_t rows,
                                          int64_t cols, double eps, cudaStream_t stream) {
  // TODO(day05): launch layernorm_forward_warp_kernel<T> on `stream`, with the block and grid
  // your kernel expects, and return cudaGetLastError(). What must hold: a block of whole warps,
  // at most 1024 threads; no launch when rows == 0 (a grid of no blocks is an error); a grid of
  // at most 2^31 - 1 blocks, and if you launch fewer than the rows need, your kernel loops.
  // How many blocks the GPU can run at once (and so how many are worth launching) depends on
  // the block's size: the lesson says how to reason about it.
  return cudaErrorNotYetImplemented;
}

#define INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_WARP(T)                                            \
  template cudaError_t launch_layernorm_forward_warp<T>(const T*, const T*, const T*, T*,       \
                                                        acc_type_t<T>*, acc_type_t<T>*, int64_t, \
                                                        int64_t, double, cudaStream_t);
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_WARP(__half)
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_WARP(__nv_bfloat16)
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_WARP(float)
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_WARP(double)
