// LayerNorm backward on the GPU: three kernels, one idea each.
//
// The forward pass saved mean and rstd of every row; with x̂ = (x − mean) · rstd it returned
// y = x̂ · γ + β. From dy = ∂L/∂y this file computes
//   dx      one block per row                           layernorm_backward_dx_kernel
//   dγ, dβ  sums over the rows, in two stages:          param_partials_kernel
//           each strip of rows into a partial buffer,   param_sums_kernel
//           then the strips' partials per column.
// No atomics: every sum is taken in the same order on every run, so a run gives the same
// bits as the last (atomicAdd would add in whatever order the blocks happen to finish).
//
// Sums run in T. Each is short (a thread's share of a row or of a strip, a tree, at most
// kMaxStrips partials), so float keeps them within about 1e-6 of the sum of |terms|; double
// runs at 1/32 of float's speed on a T4. The CPU path, where double is cheap, uses it.
#include "course_todo.h"
#include "layernorm_backward.h"
#include "reductions.cuh"  // day02's warp and block sums

namespace {

constexpr int kThreadsPerRow = 256;       // dx: a block of 256 threads per row
constexpr int64_t kMaxRowBlocks = 65535;  // rows beyond this are taken by a grid-stride loop
constexpr int kTileColumns = 32;          // stage 1: a block covers 32 columns (a warp's lanes) ...
constexpr int kRowLanes = 8;              // ... and 8 rows at a time (one row per warp)
constexpr int kThreadsPerSum = 256;       // stage 2: one thread per column

COURSE_TODO("day03: layernorm_backward.cu, layernorm_backward_dx_kernel: sum g and g * xhat over the row with block_reduce_sum2, then write dx, then delete this line");
// dx, one block per row. With g_j = dy_j · γ_j, the gradient that reaches x̂_j:
//
//   dx_j = rstd · (g_j − mean(g) − x̂_j · mean(g · x̂))
//
// where both means are over the row's D features.
template <typename T>
__global__ void layernorm_backward_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                             const T* __restrict__ gamma, const T* __restrict__ mean,
                                             const T* __restrict__ rstd, T* __restrict__ dx,
                                             int64_t rows, int cols) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* dy_row = dy + row * cols;  // 64-bit offsets: rows * cols can exceed 2^31
    const T* x_row = x + row * cols;
    T* dx_row = dx + row * cols;
    const T row_mean = mean[row];
    const T row_rstd = rstd[row];
    // TODO(day03): strided over j like day02's kernel, add up g = dy_row[j] * gamma[j] and
    // g * xhat with xhat = (x_row[j] - row_mean) * row_rstd; block_reduce_sum2 turns the two
    // into row sums; then write dx_row[j] by the formula above.
  }
}

COURSE_TODO("day03: layernorm_backward.cu, param_partials_kernel: sum dy * xhat and dy over this thread's rows, combine the 8 row lanes in shared memory, write the strip's partials, then delete this line");
// Stage 1 of dγ_j = Σ_rows dy_j · x̂_j and dβ_j = Σ_rows dy_j. Block (blockIdx.x, blockIdx.y)
// sums strip blockIdx.y of the rows for the 32 columns of tile blockIdx.x. Thread (x, y) takes
// column x of the tile and rows y, y + 8, ... of the strip, so each warp reads 32 neighbouring
// elements of a row at a time; the 8 sums of each column then meet in shared memory.
template <typename T>
__global__ void param_partials_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                      const T* __restrict__ mean, const T* __restrict__ rstd,
                                      T* __restrict__ partial_dgamma, T* __restrict__ partial_dbeta,
                                      int64_t rows, int cols, int64_t rows_per_strip) {
  const int col = blockIdx.x * kTileColumns + threadIdx.x;
  const int64_t first_row = blockIdx.y * rows_per_strip;
  const int64_t end_row = first_row + rows_per_strip < rows ? first_row + rows_per_strip : rows;
  T* strip_dgamma = partial_dgamma + blockIdx.y * static_cast<int64_t>(cols);  // this strip's row
  T* strip_dbeta = partial_dbeta + blockIdx.y * static_cast<int64_t>(cols);
  // TODO(day03): each thread adds dy * xhat and dy over rows first_row + threadIdx.y, then
  // every kRowLanes-th row, below end_row (only if col < cols); the 8 row lanes store their
  // sums in __shared__ T arrays [kRowLanes][kTileColumns]; after a __syncthreads() lane 0 adds
  // them up and writes strip_dgamma[col] and strip_dbeta[col].
}

COURSE_TODO("day03: layernorm_backward.cu, param_sums_kernel: add up every strip's partials of this column, strip 0 first, then delete this line");
// Stage 2: one thread per column adds the strips' partials in order, strip 0 first, so the
// result never depends on which block of stage 1 finished first.
template <typename T>
__global__ void param_sums_kernel(const T* __restrict__ partial_dgamma,
                                  const T* __restrict__ partial_dbeta, T* __restrict__ dgamma,
                                  T* __restrict__ dbeta, int64_t num_strips, int cols) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  // TODO(day03): sum partial_dgamma[strip * cols + col] and partial_dbeta[...] over the
  // strips, then write dgamma[col] and dbeta[col] (0 when there are no strips).
}

}  // namespace

template <typename T>
cudaError_t launch_layernorm_backward_dx(const T* dy, const T* x, const T* gamma, const T* mean,
                                         const T* rstd, T* dx, int64_t rows, int64_t cols,
                                         cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;  // nothing to do, and a grid of 0 blocks is an error
  const int blocks = static_cast<int>(rows < kMaxRowBlocks ? rows : kMaxRowBlocks);
  layernorm_backward_dx_kernel<T><<<blocks, kThreadsPerRow, 0, stream>>>(
      dy, x, gamma, mean, rstd, dx, rows, static_cast<int>(cols));
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_layernorm_backward_params(const T* dy, const T* x, const T* mean, const T* rstd,
                                             T* partials, T* dgamma, T* dbeta, int64_t rows,
                                             int64_t cols, cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  const int64_t strips = num_param_strips(rows);
  T* partial_dgamma = partials;
  T* partial_dbeta = partials + strips * cols;
  if (strips > 0) {  // without rows there are no strips, and stage 2 writes zeros
    const dim3 grid(static_cast<unsigned>((cols + kTileColumns - 1) / kTileColumns),
                    static_cast<unsigned>(strips));
    param_partials_kernel<T><<<grid, dim3(kTileColumns, kRowLanes), 0, stream>>>(
        dy, x, mean, rstd, partial_dgamma, partial_dbeta, rows, static_cast<int>(cols),
        rows_per_param_strip(rows));
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
  }
  const int blocks = static_cast<int>((cols + kThreadsPerSum - 1) / kThreadsPerSum);
  param_sums_kernel<T><<<blocks, kThreadsPerSum, 0, stream>>>(partial_dgamma, partial_dbeta, dgamma,
                                                             dbeta, strips, static_cast<int>(cols));
  return cudaGetLastError();
}

template cudaError_t launch_layernorm_backward_dx<float>(const float*, const float*, const float*,
                                                         const float*, const float*, float*, int64_t,
                                                         int64_t, cudaStream_t);
template cudaError_t launch_layernorm_backward_dx<double>(const double*, const double*, const double*,
                                                          const double*, const double*, double*,
                                                          int64_t, int64_t, cudaStream_t);
template cudaError_t launch_layernorm_backward_params<float>(const float*, const float*, const float*,
                                                             const float*, float*, float*, float*,
                                                             int64_t, int64_t, cudaStream_t);
template cudaError_t launch_layernorm_backward_params<double>(const double*, const double*,
                                                              const double*, const double*, double*,
                                                              double*, double*, int64_t, int64_t,
                                                              cudaStream_t);
