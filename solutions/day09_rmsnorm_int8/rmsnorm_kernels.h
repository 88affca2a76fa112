// RMSNorm and RMSNorm fused with per-row INT8 quantization: the launchers. Plain pointers,
// sizes and a stream, no torch headers, as on days 4 and 5. T is __half, __nv_bfloat16 or
// float; every sum and every product runs in float.
//
//   forward    rstd = 1 / sqrt(mean(x²) + eps),   y = x · rstd · w           over each row of D
//   backward   x̂ = x · rstd,  g = dy · w:   dx = rstd · (g − x̂ · mean(g · x̂)),   dw = Σ_rows dy · x̂
//   quant      y as in the forward, kept in float (never rounded to T):
//              scale = max|y| / 127,   q = clamp(round(y / scale), −127, 127)
//              round half to even, as torch.round; a row with max|y| = 0 gets scale 0 and q 0
//   residual   r = x + residual, rounded to T and stored back into residual; then quant of r
//
// A missing weight (w == nullptr) counts as ones. Each thread keeps its share of the row in
// registers, and a row has at most 512 threads: 32 elements a thread as 16-byte vectors, where
// the row is whole vectors at 16-byte addresses (rows of up to kMaxCols elements), else 4
// single elements (up to kMaxScalarCols: single loads each need an address register). The
// quantization takes no longer rows; rms_norm and its backward take them with version 2 of
// their kernels, which walks the row instead of holding it (rmsnorm_row.cuh).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

constexpr int64_t kMaxCols = 16384;
constexpr int64_t kMaxScalarCols = 2048;

template <typename T>
cudaError_t launch_rms_norm_forward(const T* x, const T* w, T* y, float* rstd, int64_t rows, int64_t cols,
                                    float eps, cudaStream_t stream);

// The backward writes dx, and dw through one row of partial dw sums (float) per row group it
// runs, in dw_partials, which a second kernel adds up. This says how many partial rows there
// are for these arguments on this GPU (0 when there are no rows).
template <typename T>
int64_t rms_norm_backward_partial_rows(const T* dy, const T* x, const T* w, const T* dx, int64_t rows,
                                       int64_t cols);

template <typename T>
cudaError_t launch_rms_norm_backward(const T* dy, const T* x, const T* w, const float* rstd, T* dx,
                                     float* dw_partials, T* dw, int64_t rows, int64_t cols, cudaStream_t stream);

// residual == nullptr: quant of rms_norm(x); otherwise the residual variant.
template <typename T>
cudaError_t launch_rms_norm_quant(const T* x, T* residual, const T* w, int8_t* q, float* scale, int64_t rows,
                                  int64_t cols, float eps, cudaStream_t stream);
