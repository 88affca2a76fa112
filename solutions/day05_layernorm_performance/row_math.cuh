// What today's faster kernels share: 16-byte vectors, sums over the threads of one row when a
// row has fewer threads than a block, and rows too long for one block split over several.
#pragma once

#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>

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

// acc_t from T. bf16 is the top half of a float, so a shift widens it exactly: sm_90's
// cvt.f32.bf16 would take a register of its own for each element of a packed pair, and the
// backward's wide rows would spill.
template <typename T>
__device__ __forceinline__ acc_type_t<T> widen(T value) {
  return to_acc(value);
}
template <>
__device__ __forceinline__ float widen<__nv_bfloat16>(__nv_bfloat16 value) {
  return __uint_as_float(static_cast<unsigned int>(__bfloat16_as_ushort(value)) << 16);
}

// Element e of a vector, widened. bf16 pairs are read as 32-bit words: the low element is the
// word shifted up, the high one the word with its low half cleared, one instruction each.
template <typename T, int N>
__device__ __forceinline__ acc_type_t<T> widen_at(const AlignedVector<T, N>& vec, int e) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> && N % 2 == 0) {
    const unsigned int word = reinterpret_cast<const unsigned int*>(vec.val)[e / 2];
    return __uint_as_float(e % 2 == 0 ? word << 16 : word & 0xffff0000u);
  } else {
    return widen(vec.val[e]);
  }
}

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

// ---- A row too long for one block: split over `chunks` blocks that meet once per row ----
//
// Blocks side by side each hold their part of the row in registers and sum it; the row's
// totals need every part. Each block publishes its two partial sums in the row's slots and
// waits until every chunk's are there: one trip through L2 per row, instead of a second read
// of the row from memory. Waiting on another block is safe only when every block of the grid
// is on the GPU at once, which a cooperative launch guarantees (or refuses).
struct RowExchange {
  unsigned long long* slots = nullptr;  // [rows][chunks][2], zero before the launch
  int chunks = 1;
};

// A partial sum goes out in one 8-byte store that carries its own "written" mark (the high
// half), so a reader that sees the mark sees the value. No fence is needed; a fence would also
// wait for every store of y or dx this thread still has in flight.
__device__ __forceinline__ unsigned long long marked(float value) {
  return (1ull << 32) | __float_as_uint(value);
}

// Publishes this block's (a, b) for `row`, waits until every chunk of the row has published,
// and returns the row's pairs in chunk order, in shared memory. Every thread of the block calls it.
__device__ __forceinline__ const float2* exchange_partials(const RowExchange& exchange, int64_t row, int chunk, float a,
                                                           float b) {
  __shared__ float2 pairs[kMaxChunks];
  const int thread = threadIdx.y * blockDim.x + threadIdx.x;
  unsigned long long* slots = exchange.slots + row * exchange.chunks * 2;
  __syncthreads();  // the previous row's pairs may still be being read
  if (thread == 0) {
    __stcg(slots + chunk * 2, marked(a));
    __stcg(slots + chunk * 2 + 1, marked(b));
  }
  if (thread < exchange.chunks) {  // a lane per chunk waits for its pair, read past L1
    const volatile unsigned long long* slot = slots + thread * 2;
    unsigned long long first = 0;
    unsigned long long second = 0;
    while (((first = slot[0]) >> 32) == 0) {
    }
    while (((second = slot[1]) >> 32) == 0) {
    }
    pairs[thread] = make_float2(__uint_as_float(static_cast<unsigned int>(first)),
                                __uint_as_float(static_cast<unsigned int>(second)));
  }
  __syncthreads();
  return pairs;
}

// A build may lower the GPU's limit on a block's shared memory: tests build with a T4's 65536
// bytes to run the T4's launch plans on a larger GPU.
#ifndef LAYERNORM_MAX_SHARED_BYTES
#define LAYERNORM_MAX_SHARED_BYTES (1 << 30)
#endif

// The host's answers are kept in function-local statics. Outside an anonymous namespace such a
// static in a template is a "unique" symbol, and a library holding one can never be unloaded:
// the notebook's rebuild in the same process could not replace it.
namespace {

// What the host asks the driver about a GPU (its attributes, how many blocks fit) costs
// microseconds, as much as a small call's kernels: each answer is asked for once per GPU.
template <typename Key, typename Ask>
auto asked_once(const Key& key, Ask ask) {
  using Answer = decltype(ask());
  static std::mutex mutex;
  static std::map<std::pair<int, Key>, Answer> answers;
  int device = 0;
  cudaGetDevice(&device);
  const std::lock_guard<std::mutex> lock(mutex);
  auto found = answers.find({device, key});
  if (found == answers.end()) found = answers.emplace(std::make_pair(device, key), ask()).first;
  return found->second;
}

// The slots of a split launch come from a stream-ordered memory pool: freed in
// stream order once the kernel ends, so the launchers need no workspace argument. The pool is
// one of our own that keeps what is freed: the default pool hands its memory back to the
// driver at each synchronize, and mapping it again cost more host time than a wide row's
// kernel. None where the GPU cannot launch cooperatively or has no memory pools.
inline cudaMemPool_t exchange_pool() {
  return asked_once(0, [] {
    int device = 0;
    int cooperative = 0;
    int pools = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device);
    cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device);
    cudaMemPool_t pool = nullptr;
    if (cooperative == 0 || pools == 0) return pool;
    cudaMemPoolProps properties{};
    properties.allocType = cudaMemAllocationTypePinned;
    properties.location.type = cudaMemLocationTypeDevice;
    properties.location.id = device;
    if (cudaMemPoolCreate(&pool, &properties) != cudaSuccess) {
      cudaGetLastError();
      return static_cast<cudaMemPool_t>(nullptr);
    }
    unsigned long long keep_all = ~0ull;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all);
    return pool;
  });
}

// Dynamic shared memory a block of `kernel` may have on this GPU: the most a block may ask for
// (64 KB on a T4, 227 KB on an H100), less what the kernel declares itself. Past 48 KB a
// kernel must be allowed it before a launch: it is allowed all of it, once, so that a launch of
// any size up to that goes (allowing each launch its own size would refuse a larger one
// allowed before). Where that is refused, 48 KB.
template <typename Kernel>
int room_for_shared(Kernel kernel) {
  return asked_once(reinterpret_cast<const void*>(kernel), [&] {
    constexpr int kDefault = 48 * 1024;
    int device = 0;
    int most = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (most > LAYERNORM_MAX_SHARED_BYTES) most = LAYERNORM_MAX_SHARED_BYTES;
    cudaFuncAttributes attributes{};
    cudaFuncGetAttributes(&attributes, kernel);
    const int declared = static_cast<int>(attributes.sharedSizeBytes);
    if (most <= kDefault) return most - declared;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most - declared) != cudaSuccess) {
      cudaGetLastError();
      return kDefault - declared;
    }
    return most - declared;
  });
}

inline bool split_launch_supported() { return exchange_pool() != nullptr; }

inline cudaError_t open_exchange(RowExchange& exchange, int64_t rows, int chunks, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(rows) * chunks * 2 * sizeof(unsigned long long);
  void* memory = nullptr;
  const cudaError_t error = cudaMallocFromPoolAsync(&memory, bytes, exchange_pool(), stream);
  if (error != cudaSuccess) return error;
  exchange.slots = static_cast<unsigned long long*>(memory);
  exchange.chunks = chunks;
  return cudaMemsetAsync(memory, 0, bytes, stream);
}

inline cudaError_t close_exchange(const RowExchange& exchange, cudaStream_t stream) {
  return cudaFreeAsync(exchange.slots, stream);
}

// How many blocks of `kernel` fit on this GPU at once: a cooperative launch may not ask more.
template <typename Kernel>
int64_t blocks_at_once(Kernel kernel, int threads, size_t shared_bytes) {
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), threads, shared_bytes);
  return asked_once(key, [&] {
    int device = 0;
    int sms = 0;
    int per_sm = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared_bytes);
    return static_cast<int64_t>(sms) * per_sm;
  });
}

// cudaLaunchCooperativeKernel takes the arguments as pointers to values of exactly the
// kernel's parameter types: they are converted into a tuple of those types first.
template <typename... Params, typename... Args>
cudaError_t launch_cooperative(void (*kernel)(Params...), int blocks, dim3 threads, size_t shared_bytes,
                               cudaStream_t stream, Args... args) {
  std::tuple<Params...> values(args...);
  void* pointers[sizeof...(Params)];
  std::apply([&](auto&... value) {
    int i = 0;
    ((pointers[i++] = &value), ...);
  }, values);
  return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), blocks, threads, pointers, shared_bytes,
                                     stream);
}

}  // namespace
