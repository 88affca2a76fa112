// Sums over the threads of a warp and of a block: how the threads that share a row add up
// their partial sums. Written on day02; days 3 to 5 include it as given.
//
// acc_t is the type the sum runs in: float or double (from day04 on, float for fp16 and bf16
// too). A block is 1-D (threadIdx.x only). Every sum adds in an order fixed by lane and warp
// numbers, so the same inputs give the same bits on every run.
#pragma once

#include "course_todo.h"

constexpr int kWarpSize = 32;

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
  value = lane < num_warps ? warp_sums[lane] : acc_t(0);
  return warp_reduce_sum(value);
}

// Sums of `a` and of `b` over the whole block, the two at once (one pair of barriers for
// both); every thread receives both totals. The backward (day03) needs two sums per row.
template <typename acc_t>
__device__ void block_reduce_sum2(acc_t& a, acc_t& b) {
  __shared__ acc_t warp_sums[2][kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = (blockDim.x + kWarpSize - 1) / kWarpSize;

  a = warp_reduce_sum(a);
  b = warp_reduce_sum(b);
  __syncthreads();  // an earlier call may still be reading warp_sums
  if (lane == 0) {
    warp_sums[0][warp] = a;
    warp_sums[1][warp] = b;
  }
  __syncthreads();
  a = warp_reduce_sum(lane < num_warps ? warp_sums[0][lane] : acc_t(0));
  b = warp_reduce_sum(lane < num_warps ? warp_sums[1][lane] : acc_t(0));
}
