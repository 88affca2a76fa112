// What both kernel files use: values moved between the element type and the accumulation
// type, and sums over a warp and over a block.
#pragma once

#include "layernorm_kernels.h"

constexpr int kWarpSize = 32;

// An element as the accumulation type, and a result back as the element type (rounded to
// nearest). float and double need nothing; __half and __nv_bfloat16 need CUDA's intrinsics,
// because PyTorch compiles extensions with the half types' implicit conversions and operators
// switched off (-D__CUDA_NO_HALF_CONVERSIONS__ and friends). That is a feature: `h1 + h2` does
// not compile, so no sum can slip into half precision unnoticed.
template <typename T>
__device__ __forceinline__ acc_type_t<T> to_acc(T value) {
  return value;
}
template <>
__device__ __forceinline__ float to_acc<__half>(__half value) {
  return __half2float(value);
}
template <>
__device__ __forceinline__ float to_acc<__nv_bfloat16>(__nv_bfloat16 value) {
  return __bfloat162float(value);
}

template <typename T>
__device__ __forceinline__ T from_acc(acc_type_t<T> value) {
  return value;
}
template <>
__device__ __forceinline__ __half from_acc<__half>(float value) {
  return __float2half_rn(value);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float value) {
  return __float2bfloat16_rn(value);
}

// Sum of `value` over the 32 lanes of a warp; every lane receives the total.
template <typename acc_t>
__device__ acc_t warp_reduce_sum(acc_t value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// Sum of `value` over the whole block; every thread receives the total.
template <typename acc_t>
__device__ acc_t block_reduce_sum(acc_t value) {
  __shared__ acc_t warp_sums[kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  value = warp_reduce_sum(value);
  __syncthreads();  // an earlier call may still be reading warp_sums
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  // Every warp adds up the per-warp sums, so the total reaches all threads without another barrier.
  return warp_reduce_sum(lane < num_warps ? warp_sums[lane] : acc_t(0));
}

// Sums of `a` and of `b` over the whole block, the two at once (one pair of barriers for
// both); every thread receives both totals.
template <typename acc_t>
__device__ void block_reduce_sum2(acc_t& a, acc_t& b) {
  __shared__ acc_t warp_sums[2][kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  a = warp_reduce_sum(a);
  b = warp_reduce_sum(b);
  __syncthreads();
  if (lane == 0) {
    warp_sums[0][warp] = a;
    warp_sums[1][warp] = b;
  }
  __syncthreads();
  a = warp_reduce_sum(lane < num_warps ? warp_sums[0][lane] : acc_t(0));
  b = warp_reduce_sum(lane < num_warps ? warp_sums[1][lane] : acc_t(0));
}
