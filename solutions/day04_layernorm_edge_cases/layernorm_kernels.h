// The LayerNorm kernels' launchers. Plain pointers, sizes and a
// stream, no torch headers: the .cu files rebuild in seconds, and the .cpp includes this too.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "acc_type.h"

// dgamma and dbeta are sums over all rows, taken in two stages (as on day03): each strip of
// rows is summed into its own row of a partial buffer, then the strips' partials are added
// up per column. The CPU path cuts the rows into the same strips.
constexpr int64_t kMinRowsPerStrip = 32;
constexpr int64_t kMaxStrips = 256;  // bounds the partial buffer and the length of stage 2's sum

inline int64_t num_param_strips(int64_t rows) {
  const int64_t strips = (rows + kMinRowsPerStrip - 1) / kMinRowsPerStrip;
  return strips < kMaxStrips ? strips : kMaxStrips;
}

// Every strip has this many rows, except the last, which has the rest.
inline int64_t rows_per_param_strip(int64_t rows) {
  const int64_t strips = num_param_strips(rows);
  return strips == 0 ? 0 : (rows + strips - 1) / strips;
}

// Both stages take the columns in tiles of 32 (a warp's lanes), and a strip's row of partials
// has whole tiles: D rounded up to a multiple of 32.
constexpr int kParamTileColumns = 32;

inline int64_t padded_param_columns(int64_t cols) {
  return (cols + kParamTileColumns - 1) / kParamTileColumns * kParamTileColumns;
}

// Every launcher reads x, y, dy and dx as [rows, cols] row-major, gamma, beta, dgamma and dbeta
// as [cols], mean and rstd as [rows]; launches on `stream`; and returns the launch error
// (cudaSuccess when none). rows may be 0 (nothing is launched); 1 <= cols < 2^31.

template <typename T>
cudaError_t launch_layernorm_forward(const T* x, const T* gamma, const T* beta, T* y,
                                     acc_type_t<T>* mean, acc_type_t<T>* rstd, int64_t rows,
                                     int64_t cols, double eps, cudaStream_t stream);

template <typename T>
cudaError_t launch_layernorm_backward_dx(const T* dy, const T* x, const T* gamma,
                                         const acc_type_t<T>* mean, const acc_type_t<T>* rstd,
                                         T* dx, int64_t rows, int64_t cols, cudaStream_t stream);

// partials: scratch of 2 * num_param_strips(rows) * padded_param_columns(cols) elements of
// acc_type_t<T> (dgamma's partials, then dbeta's); every element is written before it is read.
template <typename T>
cudaError_t launch_layernorm_backward_params(const T* dy, const T* x, const acc_type_t<T>* mean,
                                             const acc_type_t<T>* rstd, acc_type_t<T>* partials,
                                             T* dgamma, T* dbeta, int64_t rows, int64_t cols,
                                             cudaStream_t stream);
