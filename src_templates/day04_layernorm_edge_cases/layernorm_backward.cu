// LayerNorm backward on the GPU, hardened like the forward: any float type, any B and D.
//
// With x̂ = (x − mean) · rstd (mean and rstd saved by the forward) and g_j = dy_j · γ_j:
//   dx_j = rstd · (g_j − mean(g) − x̂_j · mean(g · x̂))   one block per row     layernorm_backward_dx_kernel
//   dγ_j = Σ_rows dy_j · x̂_j,  dβ_j = Σ_rows dy_j       strips of rows, then  param_partials_kernel
//                                                        the strips per column param_sums_kernel
// No atomics: every sum is taken in the same order on every run (day03). Every sum runs in
// acc_type_t<T>, and only the final dx, dγ and dβ are rounded to T.
#include "device_math.cuh"
#include "layernorm_kernels.h"
#include "reductions.cuh"

namespace {

constexpr int kThreadsPerRow = 256;       // dx: a block of 256 threads per row
constexpr int64_t kMaxRowBlocks = 65535;  // enough to fill any GPU; more rows are looped over
constexpr int kTileColumns = 32;          // stage 1: a block covers 32 columns (a warp's lanes) ...
constexpr int kRowLanes = 8;              // ... and 8 rows at a time (one row per warp)
constexpr int kThreadsPerSum = 256;       // stage 2: one thread per column

template <typename T>
__global__ void layernorm_backward_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                             const T* __restrict__ gamma,
                                             const acc_type_t<T>* __restrict__ mean,
                                             const acc_type_t<T>* __restrict__ rstd,
                                             T* __restrict__ dx, int64_t rows, int cols) {
  using acc_t = acc_type_t<T>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t row_start = row * cols;  // 64-bit: 32769 rows of 65536 pass 2^31
    const T* dy_row = dy + row_start;
    const T* x_row = x + row_start;
    T* dx_row = dx + row_start;
    const acc_t row_mean = mean[row];
    const acc_t row_rstd = rstd[row];

    acc_t sum_g = 0;
    acc_t sum_g_xhat = 0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
      const acc_t g = to_acc(dy_row[j]) * to_acc(gamma[j]);
      sum_g += g;
      sum_g_xhat += g * (to_acc(x_row[j]) - row_mean) * row_rstd;
    }
    block_reduce_sum2(sum_g, sum_g_xhat);
    const acc_t mean_g = sum_g / cols;
    const acc_t mean_g_xhat = sum_g_xhat / cols;

    for (int j = threadIdx.x; j < cols - 1; j += blockDim.x) {
      const acc_t xhat = (to_acc(x_row[j]) - row_mean) * row_rstd;
      const acc_t g = to_acc(dy_row[j]) * to_acc(gamma[j]);
      dx_row[j] = from_acc<T>(row_rstd * (g - mean_g - xhat * mean_g_xhat));
    }
  }
}

// Stage 1 of dγ and dβ: block (blockIdx.x, blockIdx.y) sums strip blockIdx.y of the rows for
// the 32 columns of tile blockIdx.x. Thread (x, y) takes column x of the tile and rows y, y + 8,
// ... of the strip, so each warp reads 32 neighbouring elements of a row at a time; the 8
// sums of each column then meet in shared memory.
template <typename T>
__global__ void param_partials_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                      const acc_type_t<T>* __restrict__ mean,
                                      const acc_type_t<T>* __restrict__ rstd,
                                      acc_type_t<T>* __restrict__ partial_dgamma,
                                      acc_type_t<T>* __restrict__ partial_dbeta, int64_t rows,
                                      int cols, int64_t rows_per_strip) {
  using acc_t = acc_type_t<T>;
  __shared__ acc_t dgamma_lanes[kRowLanes][kTileColumns];
  __shared__ acc_t dbeta_lanes[kRowLanes][kTileColumns];
  const int col = blockIdx.x * kTileColumns + threadIdx.x;
  const int64_t first_row = blockIdx.y * rows_per_strip;
  const int64_t end_row = first_row + rows_per_strip < rows ? first_row + rows_per_strip : rows;
  acc_t dgamma = 0;
  acc_t dbeta = 0;
  if (col < cols) {
    for (int64_t row = first_row + threadIdx.y; row < end_row; row += kRowLanes) {
      const int64_t at = row * cols + col;  // 64-bit, as everywhere
      const acc_t dy_value = to_acc(dy[at]);
      dgamma += dy_value * (to_acc(x[at]) - mean[row]) * rstd[row];
      dbeta += dy_value;
    }
  }
  dgamma_lanes[threadIdx.y][threadIdx.x] = dgamma;
  dbeta_lanes[threadIdx.y][threadIdx.x] = dbeta;
  if (threadIdx.y == 0 && col < cols) {
    for (int lane = 1; lane < kRowLanes; ++lane) {
      dgamma += dgamma_lanes[lane][threadIdx.x];
      dbeta += dbeta_lanes[lane][threadIdx.x];
    }
    partial_dgamma[blockIdx.y * static_cast<int64_t>(cols) + col] = dgamma;
    partial_dbeta[blockIdx.y * static_cast<int64_t>(cols) + col] = dbeta;
  }
}

// Stage 2: one thread per column adds the strips' partials in order, strip 0 first, and
// rounds the total to T once.
template <typename T>
__global__ void param_sums_kernel(const acc_type_t<T>* __restrict__ partial_dgamma,
                                  const acc_type_t<T>* __restrict__ partial_dbeta,
                                  T* __restrict__ dgamma, T* __restrict__ dbeta,
                                  int64_t num_strips, int cols) {
  using acc_t = acc_type_t<T>;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  acc_t dgamma_sum = 0;
  acc_t dbeta_sum = 0;
  for (int64_t strip = 0; strip < num_strips; ++strip) {
    dgamma_sum += partial_dgamma[strip * cols + col];
    dbeta_sum += partial_dbeta[strip * cols + col];
  }
  if (col >= cols) return;
  dgamma[col] = from_acc<T>(dgamma_sum);
  dbeta[col] = from_acc<T>(dbeta_sum);
}

}  // namespace

template <typename T>
cudaError_t launch_layernorm_backward_dx(const T* dy, const T* x, const T* gamma,
                                         const acc_type_t<T>* mean, const acc_type_t<T>* rstd,
                                         T* dx, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;  // nothing to do, and a grid of 0 blocks is an error
  const int blocks = static_cast<int>(rows < kMaxRowBlocks ? rows : kMaxRowBlocks);
  layernorm_backward_dx_kernel<T><<<blocks, kThreadsPerRow>>>(
      dy, x, gamma, mean, rstd, dx, rows, static_cast<int>(cols));
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_layernorm_backward_params(const T* dy, const T* x, const acc_type_t<T>* mean,
                                             const acc_type_t<T>* rstd, acc_type_t<T>* partials,
                                             T* dgamma, T* dbeta, int64_t rows, int64_t cols,
                                             cudaStream_t stream) {
  const int64_t strips = num_param_strips(rows);
  acc_type_t<T>* partial_dgamma = partials;
  acc_type_t<T>* partial_dbeta = partials + strips * cols;
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
  param_sums_kernel<T><<<blocks, kThreadsPerSum, 0, stream>>>(partial_dgamma, partial_dbeta,
                                                             dgamma, dbeta, strips,
                                                             static_cast<int>(cols));
  return cudaGetLastError();
}

#define INSTANTIATE_LAUNCH_LAYERNORM_BACKWARD(T)                                                   \
  template cudaError_t launch_layernorm_backward_dx<T>(const T*, const T*, const T*,               \
                                                       const acc_type_t<T>*, const acc_type_t<T>*, \
                                                       T*, int64_t, int64_t, cudaStream_t);        \
  template cudaError_t launch_layernorm_backward_params<T>(                                        \
      const T*, const T*, const acc_type_t<T>*, const acc_type_t<T>*, acc_type_t<T>*, T*, T*,     \
      int64_t, int64_t, cudaStream_t);
INSTANTIATE_LAUNCH_LAYERNORM_BACKWARD(__half)
INSTANTIATE_LAUNCH_LAYERNORM_BACKWARD(__nv_bfloat16)
INSTANTIATE_LAUNCH_LAYERNORM_BACKWARD(float)
INSTANTIATE_LAUNCH_LAYERNORM_BACKWARD(double)
