// Today's kernels' launchers, beside day04's (layernorm_kernels.h): the same plain pointers,
// sizes and stream, no torch headers, so each .cu rebuilds on its own in seconds.
//
//   forward, version 1  launch_layernorm_forward              a block per row       (day04)
//            version 2  launch_layernorm_forward_warp         a warp per row
//            version 3  launch_layernorm_forward_vectorized   ... with 16-byte loads
//            version 4  launch_layernorm_forward_registers    the row held in registers, over
//                                                             several blocks when it is long
//   backward, version 1 launch_layernorm_backward_dx + _params   three kernels        (day04)
//             version 2 launch_layernorm_backward_fused          dx and partial dγ, dβ in one,
//                                                                long rows over several blocks
//
// A version that cannot take a shape hands it to the version before it (registers ->
// vectorized -> warp), so every launcher accepts every input day04's does.
#pragma once

#include <cstdint>

#include "layernorm_kernels.h"

constexpr int kVectorBytes = 16;  // the widest load one thread can issue: ld.global.v4.b32

inline bool is_aligned(const void* pointer, int bytes = kVectorBytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

// How a kernel that holds rows in registers splits a row of `cols` elements: each thread owns
// `vecs_per_thread` vectors of `vec` elements, `threads_per_row` threads share a row, and a
// block holds `rows_per_block` rows. threads_per_row == 0: the row does not fit. A row too long
// for one block is split over `chunks` blocks side by side, each holding `chunk_vecs` vectors
// of it (the last one the rest); chunk_vecs == 0: the whole row is one block's.
struct RowPlan {
  int vec = 0;
  int threads_per_row = 0;
  int rows_per_block = 0;
  int vecs_per_thread = 0;
  int chunks = 1;
  int chunk_vecs = 0;
  bool fits() const { return threads_per_row > 0; }
};

constexpr int kPlanThreadsPerBlock = 256;  // for rows of a warp or less: 256 / threads_per_row rows

// Up to 32 threads per row (rows of at most 32 * min_vecs vectors): the smallest power of two
// of threads, then of vectors per thread, that covers the row (their sums are shuffles inside
// the warp). Longer rows: min_vecs vectors per thread, or more where the row would otherwise
// need more than max_threads threads, up to max_vecs; as many threads as that takes, a
// multiple of 32. Rows that are not whole 16-byte vectors at 16-byte addresses fit only up to
// 32 elements, one per thread. min_vecs is a power of two.
inline RowPlan plan_rows(int64_t cols, int element_bytes, bool aligned, int min_vecs, int max_vecs,
                         int max_threads) {
  const int vec = kVectorBytes / element_bytes;
  RowPlan plan;
  if (aligned && cols % vec == 0) {
    const int64_t vecs = cols / vec;
    if (vecs <= 32 * min_vecs) {
      int threads = 1;
      while (threads < 32 && threads < vecs) threads *= 2;
      int per_thread = 1;
      while (static_cast<int64_t>(threads) * per_thread < vecs) per_thread *= 2;
      return {vec, threads, kPlanThreadsPerBlock / threads, per_thread};
    }
    const int64_t least = (vecs + max_threads - 1) / max_threads;  // vectors per thread at max_threads
    const int64_t per_thread = least > min_vecs ? least : min_vecs;
    if (per_thread > max_vecs) return plan;
    const int64_t threads = ((vecs + per_thread - 1) / per_thread + 31) / 32 * 32;
    return {vec, static_cast<int>(threads), 1, static_cast<int>(per_thread)};
  }
  if (cols <= 32) {
    int threads = 1;
    while (threads < cols) threads *= 2;
    return {1, threads, kPlanThreadsPerBlock / threads, 1};
  }
  return plan;
}

constexpr int kMaxChunks = 32;  // a lane of a warp waits for each chunk's sums (row_math.cuh)

// A row of whole aligned vectors split into as few chunks as blocks of `max_threads` threads,
// `vecs_per_thread` vectors each, can hold, shared out evenly (a multiple of 32 threads each).
// It does not fit past kMaxChunks chunks, or when the row is not whole aligned vectors.
inline RowPlan plan_split_rows(int64_t cols, int element_bytes, bool aligned, int vecs_per_thread, int max_threads) {
  const int vec = kVectorBytes / element_bytes;
  RowPlan plan;
  if (!aligned || cols % vec != 0) return plan;
  const int64_t vecs = cols / vec;
  const int64_t per_block = static_cast<int64_t>(max_threads) * vecs_per_thread;
  const int64_t chunks = (vecs + per_block - 1) / per_block;
  if (chunks > kMaxChunks) return plan;
  const int64_t chunk_vecs = (vecs + chunks - 1) / chunks;
  const int64_t threads = ((chunk_vecs + vecs_per_thread - 1) / vecs_per_thread + 31) / 32 * 32;
  return {vec, static_cast<int>(threads), 1, vecs_per_thread, static_cast<int>(chunks), static_cast<int>(chunk_vecs)};
}

template <typename T>
cudaError_t launch_layernorm_forward_warp(const T* x, const T* gamma, const T* beta, T* y,
                                          acc_type_t<T>* mean, acc_type_t<T>* rstd, int64_t rows,
                                          int64_t cols, double eps, cudaStream_t stream);

template <typename T>
cudaError_t launch_layernorm_forward_vectorized(const T* x, const T* gamma, const T* beta, T* y,
                                                acc_type_t<T>* mean, acc_type_t<T>* rstd,
                                                int64_t rows, int64_t cols, double eps,
                                                cudaStream_t stream);

template <typename T>
cudaError_t launch_layernorm_forward_registers(const T* x, const T* gamma, const T* beta, T* y,
                                               acc_type_t<T>* mean, acc_type_t<T>* rstd,
                                               int64_t rows, int64_t cols, double eps,
                                               cudaStream_t stream);

// The fused backward writes one row of partial dγ and one of dβ per block, or per group of
// blocks that split a row. This says how many such rows it writes for the shape on the current
// GPU, or 0 when it cannot take it (no rows, float64, more than 32 elements a row that are not
// whole aligned vectors, a row longer than its split can hold, or a GPU that cannot launch a
// split row): then use version 1.
template <typename T>
int64_t layernorm_backward_fused_blocks(int64_t rows, int64_t cols, bool aligned);

// partials: 2 * layernorm_backward_fused_blocks(...) * cols elements of acc_type_t<T>.
template <typename T>
cudaError_t launch_layernorm_backward_fused(const T* dy, const T* x, const T* gamma,
                                            const acc_type_t<T>* mean, const acc_type_t<T>* rstd,
                                            T* dx, acc_type_t<T>* partials, T* dgamma, T* dbeta,
                                            int64_t rows, int64_t cols, cudaStream_t stream);
