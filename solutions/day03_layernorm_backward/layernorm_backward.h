// Launchers for the LayerNorm backward kernels, and how dgamma and dbeta cut the rows
// into strips. Plain pointers and a stream, no torch headers, like layernorm_forward.h.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

// dgamma and dbeta are sums over all rows, taken in two stages: each strip of rows is
// summed into its own row of a partial buffer, then the strips' partials are added up per
// column. The CPU path cuts the rows into the same strips.
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

// dy, x, dx: [rows, cols] row-major; gamma: [cols]; mean, rstd: [rows].
// Each launcher launches on `stream` and returns the launch error (cudaSuccess when none).
template <typename T>
cudaError_t launch_layernorm_backward_dx(const T* dy, const T* x, const T* gamma, const T* mean,
                                         const T* rstd, T* dx, int64_t rows, int64_t cols,
                                         cudaStream_t stream);

// partials: scratch of 2 * num_param_strips(rows) * cols elements (dgamma's partials, then
// dbeta's); every element is written before it is read. dgamma, dbeta: [cols].
template <typename T>
cudaError_t launch_layernorm_backward_params(const T* dy, const T* x, const T* mean, const T* rstd,
                                             T* partials, T* dgamma, T* dbeta, int64_t rows,
                                             int64_t cols, cudaStream_t stream);
