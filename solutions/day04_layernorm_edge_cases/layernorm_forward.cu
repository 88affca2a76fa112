// LayerNorm forward on the GPU, hardened for every input PyTorch's own LayerNorm accepts.
//
//   mean = (1/D) Σ_j x_j
//   var  = (1/D) Σ_j (x_j − mean)²      two passes over the row: stable when |mean| ≫ std
//   rstd = 1 / sqrt(var + eps)
//   y_j  = (x_j − mean) · rstd · γ_j + β_j
//
// One block per row, as on day02. What day02's kernel did not have to face (the lesson's
// catalogue): fp16 and bf16 inputs, any D from 1 up, more rows than one launch has blocks,
// B·D beyond 2^31 elements, and B = 0. Every sum runs in acc_type_t<T> (float), and mean and
// rstd are kept in it.
#include "device_math.cuh"
#include "layernorm_kernels.h"
#include "reductions.cuh"

namespace {

constexpr int kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = 65535;  // enough to fill any GPU; more rows are looped over

template <typename T>
__global__ void layernorm_forward_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                         const T* __restrict__ beta, T* __restrict__ y,
                                         acc_type_t<T>* __restrict__ mean_out,
                                         acc_type_t<T>* __restrict__ rstd_out, int64_t rows,
                                         int cols, acc_type_t<T> eps) {
  using acc_t = acc_type_t<T>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    // BEGIN BUG row_offset_in_32_bits
    const int64_t row_start = row * cols;  // 64-bit: 32769 rows of 65536 pass 2^31
    // PLANTED
    const int row_start = row * cols;
    // END BUG
    const T* x_row = x + row_start;
    T* y_row = y + row_start;

    acc_t sum = 0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) sum += to_acc(x_row[j]);
    const acc_t mean = block_reduce_sum(sum) / cols;

    acc_t squares = 0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
      const acc_t centered = to_acc(x_row[j]) - mean;
      squares += centered * centered;
    }
    // BEGIN BUG rstd_in_float
    const acc_t rstd = rsqrt(block_reduce_sum(squares) / cols + eps);  // float or double, as acc_t
    // PLANTED
    const acc_t rstd = rsqrtf(block_reduce_sum(squares) / cols + eps);
    // END BUG

    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
      const acc_t xhat = (to_acc(x_row[j]) - mean) * rstd;
      y_row[j] = from_acc<T>(xhat * to_acc(gamma[j]) + to_acc(beta[j]));
    }
    if (threadIdx.x == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

}  // namespace

template <typename T>
cudaError_t launch_layernorm_forward(const T* x, const T* gamma, const T* beta, T* y,
                                     acc_type_t<T>* mean, acc_type_t<T>* rstd, int64_t rows,
                                     int64_t cols, double eps, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;  // nothing to do, and a grid of 0 blocks is an error
  const int blocks = static_cast<int>(rows < kMaxBlocks ? rows : kMaxBlocks);
  layernorm_forward_kernel<T><<<blocks, kThreadsPerBlock, 0, stream>>>(
      x, gamma, beta, y, mean, rstd, rows, static_cast<int>(cols), static_cast<acc_type_t<T>>(eps));
  return cudaGetLastError();
}

#define INSTANTIATE_LAUNCH_LAYERNORM_FORWARD(T)                                              \
  template cudaError_t launch_layernorm_forward<T>(const T*, const T*, const T*, T*,         \
                                                   acc_type_t<T>*, acc_type_t<T>*, int64_t,  \
                                                   int64_t, double, cudaStream_t);
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD(__half)
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD(__nv_bfloat16)
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD(float)
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD(double)
