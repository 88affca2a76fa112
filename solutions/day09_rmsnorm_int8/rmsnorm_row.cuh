// What the three kernels share: how a row is split over threads, the row's max, and the
// quantization of one value. Rows are held in registers, as in day05's version 4
// (layernorm_forward_registers.cu): x is read once, y written once.
#pragma once

#include <cstdint>
#include <utility>

#include "rmsnorm_kernels.h"
#include "row_math.cuh"

// 512 threads a block leave a thread 128 registers: 32 columns of x, and the backward's 32
// running sums, fit without spilling (1024 threads would leave 64).
constexpr int kColumnsPerThread = 32;
constexpr int kScalarColumnsPerThread = kMaxScalarCols / 512;
constexpr int kMaxThreadsPerRow = 512;
constexpr int64_t kMaxBlocks = 65535;

// day05's plan_rows: kColumnsPerThread columns a thread as 16-byte vectors where the row is
// whole vectors at aligned addresses, else kScalarColumnsPerThread single elements (a
// "vector" of one, which plan_rows takes for any row). fits() is false past kMaxCols, or
// past kMaxScalarCols for single elements.
inline RowPlan rms_row_plan(int64_t cols, int element_bytes, bool aligned) {
  const int vec = kVectorBytes / element_bytes;
  if (aligned && cols % vec == 0) {
    const int vecs = kColumnsPerThread / vec;
    return plan_rows(cols, element_bytes, true, vecs, vecs, kMaxThreadsPerRow);
  }
  return plan_rows(cols, kVectorBytes, true, kScalarColumnsPerThread, kScalarColumnsPerThread, kMaxThreadsPerRow);
}

// The instance of `Kernel<kVec, kVecs>` for a plan: kVecs the plan's vectors per thread (a
// power of two up to kColumnsPerThread / kVec, or kScalarColumnsPerThread for single
// elements). Every instance has the same parameters.
template <template <int, int> class Kernel, int kVec, int kVecs = 1>
auto kernel_for_vecs(int vecs_per_thread) -> decltype(Kernel<kVec, 1>::get()) {
  if constexpr (kVecs * kVec >= (kVec == 1 ? kScalarColumnsPerThread : kColumnsPerThread)) {
    return Kernel<kVec, kVecs>::get();
  } else {
    if (vecs_per_thread <= kVecs) return Kernel<kVec, kVecs>::get();
    return kernel_for_vecs<Kernel, kVec, kVecs * 2>(vecs_per_thread);
  }
}

template <typename T, template <int, int> class Kernel>
auto kernel_for(const RowPlan& plan) -> decltype(Kernel<1, 1>::get()) {
  if (plan.vec == 1) return kernel_for_vecs<Kernel, 1>(plan.vecs_per_thread);
  return kernel_for_vecs<Kernel, kVectorBytes / sizeof(T)>(plan.vecs_per_thread);
}

// ---- Version 2, for rows the registers cannot hold (rms_norm and its backward only) ----
//
// A block of kWideThreads threads takes a row and walks it in steps, twice: a first pass for
// the row's sum, a second that reads the same elements again to write the output. The second
// read comes from L2, where the first left it, if few enough rows are in flight at once that
// their bytes fit in half the L2: wide_blocks launches no more blocks than that. Any D goes:
// 16-byte vectors where the row is whole aligned vectors, else single elements.
constexpr int kWideThreads = 512;
constexpr int kWideUnroll = 4;  // vectors a thread loads before it uses any: loads in flight

template <typename T>
int wide_vec(int64_t cols, bool aligned) {
  const int vec = kVectorBytes / static_cast<int>(sizeof(T));
  return aligned && cols % vec == 0 ? vec : 1;
}

// One block per row (a grid-stride loop past that), no more than keep `row_bytes` each in half
// the L2, and at least one per multiprocessor.
inline int64_t wide_blocks(int64_t rows, int64_t row_bytes) {
  const auto [sms, l2_bytes] = asked_once(1, [] {
    int device = 0, sms = 0, l2_bytes = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device);
    return std::make_pair(static_cast<int64_t>(sms), static_cast<int64_t>(l2_bytes));
  });
  const int64_t fit = l2_bytes / 2 / (row_bytes > 0 ? row_bytes : 1);
  const int64_t blocks = fit > sms ? fit : sms;
  const int64_t capped = blocks < kMaxBlocks ? blocks : kMaxBlocks;
  return rows < capped ? rows : capped;
}

// Vectors first, first + blockDim.x, ... (kWideUnroll of them, those before `vecs`) of a row,
// every load issued before any value is used.
template <typename Vec>
__device__ __forceinline__ void load_step(const Vec* __restrict__ row, int64_t first, int64_t vecs,
                                          Vec (&held)[kWideUnroll]) {
#pragma unroll
  for (int k = 0; k < kWideUnroll; ++k) {
    const int64_t v = first + static_cast<int64_t>(k) * blockDim.x;
    if (v < vecs) held[k] = row[v];
  }
}

// Max of `value` (≥ 0) over the threads of a row, as row_reduce_sum sums: shuffles within a
// row of up to 32 threads, shared memory for a row that is the whole block.
__device__ __forceinline__ float row_reduce_max(float value) {
  for (int offset = (blockDim.x < kWarpSize ? blockDim.x : kWarpSize) / 2; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  if (blockDim.x <= kWarpSize) return value;
  __shared__ float warp_max[kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  __syncthreads();  // an earlier call may still be reading warp_max
  if (lane == 0) warp_max[warp] = value;
  __syncthreads();
  value = lane < blockDim.x / kWarpSize ? warp_max[lane] : 0.0f;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// q = clamp(round(y / scale), −127, 127), rounding half to even (__float2int_rn, like
// torch.round). The kernels pass 1 / scale, computed once a row, and multiply: a division per
// element costs registers and time. y · (1 / scale) can differ from y / scale in the last bit,
// which moves q only where y / scale is within that bit of a half; where the scale is a power
// of two (the tests' tie rows) both are exact. A row of zeros has scale 0: inv_scale is 0, q 0.
__host__ __device__ inline float inverse_scale(float scale) { return scale == 0.0f ? 0.0f : 1.0f / scale; }

// BEGIN SOLUTION
__device__ __forceinline__ int8_t quantize_int8(float y, float inv_scale) {
  const int q = __float2int_rn(y * inv_scale);
  return static_cast<int8_t>(q < -127 ? -127 : (q > 127 ? 127 : q));
}
// STUB
COURSE_TODO("day09: rmsnorm_row.cuh, quantize_int8: q = clamp(round(y * inv_scale), -127, 127) with __float2int_rn (half to even), then delete this line");

__device__ __forceinline__ int8_t quantize_int8(float y, float inv_scale) {
  return 0;  // TODO(day09): round y * inv_scale half to even and clamp it to [-127, 127]
}
// END SOLUTION
