// What today's faster kernels share: 16-byte vectors, and sums over the threads of one row
// when a row has fewer threads than a block.
#pragma once

#include "device_math.cuh"
#include "layernorm_fast.h"
#include "reductions.cuh"

// N elements that load and store as one 16-byte access: alignas makes the compiler emit a
// single ld.global.v4 / st.global.v4 instead of N narrow ones. Only valid at an address that
// is a multiple of sizeof(AlignedVector).
template <typename T, int N>
struct alignas(sizeof(T) * N) AlignedVector {
  T val[N];
};

// Sum over the threadIdx.x of a row; every thread of the row receives it. A block is
// (threads_per_row, rows_per_block): up to 32 threads per row, a row is a power-of-two group
// of neighbouring lanes, and xor-shuffles with offsets below the group size never leave it.
// More than 32: the block holds one row, and the sum goes through shared memory.
template <typename acc_t>
__device__ __forceinline__ acc_t row_reduce_sum(acc_t value) {
  if (blockDim.x > kWarpSize) return block_reduce_sum(value);
  for (int offset = blockDim.x / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

template <typename acc_t>
__device__ __forceinline__ void row_reduce_sum2(acc_t& a, acc_t& b) {
  if (blockDim.x > kWarpSize) {
    block_reduce_sum2(a, b);
    return;
  }
  for (int offset = blockDim.x / 2; offset > 0; offset /= 2) {
    a += __shfl_xor_sync(0xffffffffu, a, offset);
    b += __shfl_xor_sync(0xffffffffu, b, offset);
  }
}
