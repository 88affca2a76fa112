// LayerNorm backward on the GPU, hardened like the forward: any float type, any B and D.
//
// With x̂ = (x − mean) · rstd (mean and rstd saved by the forward) and g_j = dy_j · γ_j:
//   dx_j = rstd · (g_j − mean(g) − x̂_j · mean(g · x̂))   one block per row     layernorm_backward_dx_kernel
//   dγ_j = Σ_rows dy_j · x̂_j,  dβ_j = Σ_rows dy_j       strips of rows, then  param_partials_kernel
//                                                        the strips per column param_sums_kernel
//                                                        (both by tiles of 32 columns)
// No atomics: every sum is taken in the same order on every run (day03). Every sum runs in
// acc_type_t<T>, and only the final dx, dγ and dβ are rounded to T.
#include "device_math.cuh"
#include "layernorm_kernels.h"
#include "reductions.cuh"

namespace {

constexpr int kThreadsPerRow = 256;       // dx: a block of 256 threads per row
constexpr int64_t kMaxRowBlocks = 65535;  // enough to fill any GPU; more rows are looped over
constexpr int kRowLanes = 8;              // stage 1: a block covers a tile's columns and 8 rows at a time

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

    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
      const acc_t xhat = (to_acc(x_row[j]) - row_mean) * row_rstd;
      const acc_t g = to_acc(dy_row[j]) * to_acc(gamma[j]);
      dx_row[j] = from_acc<T>(row_rstd * (g - mean_g - xhat * mean_g_xhat));
    }
  }
}

// Stage 1 of dγ and dβ: block (blockIdx.x, blockIdx.y) sums strip blockIdx.y of the rows for
// the 32 columns of tile blockIdx.x. Thread (x, y) takes column x of the tile and rows y, y + 8,
// ... of the strip, so each warp reads 32 neighbouring elements of a row at a time; the 8 sums
// of each column then meet in shared memory. A row of partials has whole tiles of columns
// (padded_param_columns, layernorm_kernels.h).
template <typename T>
__global__ void param_partials_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                      const acc_type_t<T>* __restrict__ mean,
                                      const acc_type_t<T>* __restrict__ rstd,
                                      acc_type_t<T>* __restrict__ partial_dgamma,
                                      acc_type_t<T>* __restrict__ partial_dbeta, int64_t rows,
                                      int cols, int64_t padded_cols, int64_t rows_per_strip) {
  using acc_t = acc_type_t<T>;
  __shared__ acc_t dgamma_lanes[kRowLanes][kParamTileColumns];
  __shared__ acc_t dbeta_lanes[kRowLanes][kParamTileColumns];
  const int col = blockIdx.x * kParamTileColumns + threadIdx.x;
  const int64_t first_row = blockIdx.y * rows_per_strip;
  const int64_t end_row = first_row + rows_per_strip < rows ? first_row + rows_per_strip : rows;
  acc_t dgamma = 0;
  acc_t dbeta = 0;
  // The last tile's threads past column D - 1 read nothing: their column would be the next
  // row's first elements, and past the last row, no memory of x or dy at all.
  for (int64_t row = first_row + threadIdx.y; col < cols && row < end_row; row += kRowLanes) {
    const int64_t at = row * cols + col;  // 64-bit, as everywhere
    const acc_t dy_value = to_acc(dy[at]);
    dgamma += dy_value * (to_acc(x[at]) - mean[row]) * rstd[row];
    dbeta += dy_value;
  }
  dgamma_lanes[threadIdx.y][threadIdx.x] = dgamma;
  dbeta_lanes[threadIdx.y][threadIdx.x] = dbeta;
  __syncthreads();  // lane 0 reads what the other 7 warps wrote: wait until they all have
  if (threadIdx.y == 0) {  // every column of the tile: past D - 1, the padding's zeros
    for (int lane = 1; lane < kRowLanes; ++lane) {
      dgamma += dgamma_lanes[lane][threadIdx.x];
      dbeta += dbeta_lanes[lane][threadIdx.x];
    }
    partial_dgamma[blockIdx.y * padded_cols + col] = dgamma;
    partial_dbeta[blockIdx.y * padded_cols + col] = dbeta;
  }
}

// Stage 2, by the same tiles: thread x of block t adds up column x of tile t over the strips,
// strip 0 first, and rounds the total to T once. Every thread has a column of the partials to
// read, the padding's included; only columns below D are stored.
template <typename T>
__global__ void param_sums_kernel(const acc_type_t<T>* __restrict__ partial_dgamma,
                                  const acc_type_t<T>* __restrict__ partial_dbeta,
                                  T* __restrict__ dgamma, T* __restrict__ dbeta,
                                  int64_t num_strips, int cols, int64_t padded_cols) {
  using acc_t = acc_type_t<T>;
  const int col = blockIdx.x * kParamTileColumns + threadIdx.x;
  acc_t dgamma_sum = 0;
  acc_t dbeta_sum = 0;
  for (int64_t strip = 0; strip < num_strips; ++strip) {
    dgamma_sum += partial_dgamma[strip * padded_cols + col];
    dbeta_sum += partial_dbeta[strip * padded_cols + col];
  }
  if (col < cols) {
    dgamma[col] = from_acc<T>(dgamma_sum);
    dbeta[col] = from_acc<T>(dbeta_sum);
  }
}
}  // namespace

template <typename T>
cudaError_t launch_layernorm_backward_dx(const T* dy, const T* x, const T* gamma,
                                         const acc_type_t<T>* mean, const acc_type_t<T>* rstd,
                                         T* dx, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;  // nothing to do, and a grid of 0 blocks is an error
  const int blocks = static_cast<int>(rows < kMaxRowBlocks ? rows : kMaxRowBlocks);
  layernorm_backward_dx_kernel<T><<<blocks, kThreadsPerRow, 0, stream>>>(
      dy, x, gamma, mean, rstd, dx, rows, static_cast<int>(cols));
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_layernorm_backward_params(const T* dy, const T* x, const acc_type_t<T>* mean,
                                             const acc_type_t<T>* rstd, acc_type_t<T>* partials,
                                             T* dgamma, T* dbeta, int64_t rows, int64_t cols,
                                             cudaStream_t stream) {
  const int64_t strips = num_param_strips(rows);
  const int64_t padded_cols = padded_param_columns(cols);
  const unsigned tiles = static_cast<unsigned>(padded_cols / kParamTileColumns);
  acc_type_t<T>* partial_dgamma = partials;
  acc_type_t<T>* partial_dbeta = partials + strips * padded_cols;
  if (strips > 0) {  // without rows there are no strips, and stage 2 writes zeros
    param_partials_kernel<T><<<dim3(tiles, static_cast<unsigned>(strips)),
                               dim3(kParamTileColumns, kRowLanes), 0, stream>>>(
        dy, x, mean, rstd, partial_dgamma, partial_dbeta, rows, static_cast<int>(cols), padded_cols,
        rows_per_param_strip(rows));
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
  }
  param_sums_kernel<T><<<tiles, kParamTileColumns, 0, stream>>>(
      partial_dgamma, partial_dbeta, dgamma, dbeta, strips, static_cast<int>(cols), padded_cols);
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
