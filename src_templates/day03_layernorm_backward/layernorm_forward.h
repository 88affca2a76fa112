// Launchers for the LayerNorm forward kernels. Plain pointers and a stream, no
// torch headers: editing the kernel file rebuilds in seconds.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

// x, y: [rows, cols] row-major; gamma, beta: [cols]; mean, rstd: [rows].
// Launches on `stream` and returns the launch error (cudaSuccess when none).
template <typename T>
cudaError_t launch_layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean,
                                     T* rstd, int64_t rows, int64_t cols, double eps,
                                     cudaStream_t stream);
