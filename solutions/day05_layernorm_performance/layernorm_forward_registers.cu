// LayerNorm forward, version 4: the row held in registers.
//
// Versions 1 to 3 read each row three times: once for the mean, once for the variance, once
// for y. When a block's rows fit in L1 the second and third reads are cheap; when they do not
// (D = 4096 and up: 8 rows of 16 KB per block, many blocks per SM) they come from L2 or from
// memory again, and the kernel moves up to twice the bytes it must. Here every thread loads
// its share of the row once, as 16-byte vectors kept in registers, and computes all three
// passes from them: x is read once and y written once, the least LayerNorm can move.
//
// A row is split by plan_rows (layernorm_fast.h): up to 32 threads per row with several rows
// per block for short rows (sums by shuffles), a block per row of up to 512 threads for long
// ones (sums through shared memory), and of up to 1024 for rows that 512 cannot hold. Each
// thread holds at most kMaxVecs vectors, 128 bytes: 32 registers whatever the dtype, because
// the vectors stay in T and are widened to acc_t only when used (see `launder`). Rows that are
// not whole aligned vectors (unless D <= 32) take version 3.
//
// Rows longer than a block can hold (D > 32768 in fp32, 65536 in 16 bits) are split over
// several blocks side by side (plan_split_rows), each taking a chunk of the row; the chunks
// meet once per row in global memory (row_math.cuh) to combine their sums, and then each
// writes its part of y. While a block waits there, nothing of its own is in flight: so a split
// block stages its chunks in shared memory, two rows at a time, and copies the next row in
// while it sums, waits and writes this one (cp.async: the copy needs no registers). x is
// still read once.
//
// Why blocks of 512 where they suffice: an SM holds two, and while one waits at a row's
// barrier the other's loads are in flight; a block of 1024 is alone on its SM, yet still
// faster than a row split over blocks. Either way a thread gets 64 registers. The bf16
// instance holding 8 vectors, left to itself, kept every element widened to fp32 from the
// first pass to the last: 98 registers, or 344 bytes of spill loads when capped at 64
// (nvcc -Xptxas -v). `launder` after each pass makes it widen them again instead, which costs
// an instruction an element and frees the registers.
//
//   mean = Σx / D, var = Σ(x − mean)² / D over the registers, y = (x − mean)·rstd·γ + β
#include <type_traits>

#include "row_math.cuh"

namespace {

constexpr int kMaxVecs = 8;             // vectors per thread: 128 bytes of the row
constexpr int kMaxThreadsPerRow = 512;
constexpr int kWideThreadsPerRow = 1024;  // rows that 512 threads cannot hold: a block alone on its SM
constexpr int kSplitVecs = 4;           // a split row's blocks: 4 vectors a thread, in shared memory ...
constexpr int kSplitThreads = 512;      // ... and up to 512 threads, two rows of that a block
constexpr int64_t kMaxBlocks = 65535;

// Tells the compiler the held words may have changed: what it widened from them in one pass
// is no longer worth keeping in registers for the next. (It emits no instruction. A lone
// 16-bit element, the unaligned rows' vector, has nothing widened worth freeing.)
template <typename Vec>
__device__ __forceinline__ void launder(Vec& vec) {
  if constexpr (sizeof(Vec) % 4 == 0) {
    unsigned int* words = reinterpret_cast<unsigned int*>(&vec);
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(Vec) / 4); ++i) asm volatile("" : "+r"(words[i]));
  }
}

// One 16-byte vector of a row, in acc_t: its elements added to a running sum, or their squared
// distances from `mean`; and its y. Taken by value: one 16-byte load, from shared memory too.
template <typename T, int kVec>
__device__ __forceinline__ acc_type_t<T> add_elements(acc_type_t<T> sum, AlignedVector<T, kVec> x) {
#pragma unroll
  for (int e = 0; e < kVec; ++e) sum += widen_at(x, e);
  return sum;
}

template <typename T, int kVec>
__device__ __forceinline__ acc_type_t<T> add_squares(acc_type_t<T> squares, AlignedVector<T, kVec> x,
                                                     acc_type_t<T> mean) {
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    const acc_type_t<T> centered = widen_at(x, e) - mean;
    squares += centered * centered;
  }
  return squares;
}

template <typename T, int kVec>
__device__ __forceinline__ AlignedVector<T, kVec> normalized(AlignedVector<T, kVec> x, AlignedVector<T, kVec> gamma,
                                                             AlignedVector<T, kVec> beta, acc_type_t<T> mean,
                                                             acc_type_t<T> rstd) {
  AlignedVector<T, kVec> y;
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    const acc_type_t<T> xhat = (widen_at(x, e) - mean) * rstd;
    y.val[e] = from_acc<T>(xhat * widen_at(gamma, e) + widen_at(beta, e));
  }
  return y;
}

// Block (threads_per_row, rows_per_block); thread (t, r) owns vectors t, t + threads_per_row,
// ... of row r of the block's current group of rows.
// kMaxThreads 512: two blocks an SM, 1024: one (either way 64 registers a thread).
template <typename T, int kVec, int kVecsPerThread, int kMaxThreads = kMaxThreadsPerRow>
__global__ void __launch_bounds__(kMaxThreads, kWideThreadsPerRow / kMaxThreads)
layernorm_forward_registers_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                   const T* __restrict__ beta, T* __restrict__ y,
                                   acc_type_t<T>* __restrict__ mean_out,
                                   acc_type_t<T>* __restrict__ rstd_out, int64_t rows, int cols,
                                   acc_type_t<T> eps) {
  using acc_t = acc_type_t<T>;
  using Vec = AlignedVector<T, kVec>;
  const int vecs = cols / kVec;
  const Vec* gamma_vecs = reinterpret_cast<const Vec*>(gamma);
  const Vec* beta_vecs = reinterpret_cast<const Vec*>(beta);
  const int64_t row_step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  // The loop runs the same number of times for the whole block: a thread past the last row
  // stays, holding nothing, so that the shuffles and barriers of the sums find everyone.
  for (int64_t first_row = static_cast<int64_t>(blockIdx.x) * blockDim.y; first_row < rows; first_row += row_step) {
    const int64_t row = first_row + threadIdx.y;
    const bool active = row < rows;
    const Vec* x_row = reinterpret_cast<const Vec*>(x + row * cols);
    Vec* y_row = reinterpret_cast<Vec*>(y + row * cols);

    Vec held[kVecsPerThread];
    acc_t sum = 0;
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (active && v < vecs) {
        held[k] = x_row[v];  // every load is issued before any sum needs one
        sum = add_elements(sum, held[k]);
      }
    }
    const acc_t mean = row_reduce_sum(sum) / cols;
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) launder(held[k]);

    acc_t squares = 0;
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (active && v < vecs) squares = add_squares(squares, held[k], mean);
    }
    const acc_t rstd = rsqrt(row_reduce_sum(squares) / cols + eps);
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) launder(held[k]);

#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (active && v < vecs) y_row[v] = normalized(held[k], gamma_vecs[v], beta_vecs[v], mean, rstd);
    }
    if (active && threadIdx.x == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

template <typename T>
using RegistersKernel = decltype(&layernorm_forward_registers_kernel<T, 1, 1>);

// The instance of the kernel for the plan: every instance has the same parameters.
template <typename T>
RegistersKernel<T> registers_kernel_for(const RowPlan& plan) {
  constexpr int kVec = kVectorBytes / sizeof(T);
  if (plan.vec == 1) return &layernorm_forward_registers_kernel<T, 1, 1>;
  if (plan.threads_per_row > kMaxThreadsPerRow) {
    return &layernorm_forward_registers_kernel<T, kVec, kMaxVecs, kWideThreadsPerRow>;
  }
  switch (plan.vecs_per_thread) {
    case 1: return &layernorm_forward_registers_kernel<T, kVec, 1>;
    case 2: return &layernorm_forward_registers_kernel<T, kVec, 2>;
    case 4: return &layernorm_forward_registers_kernel<T, kVec, 4>;
    default: return &layernorm_forward_registers_kernel<T, kVec, kMaxVecs>;
  }
}

// ---- A row split over blocks, staged in shared memory ----

// 16 bytes from global to shared memory that do not pass through registers: the copy runs
// on while the thread works, until wait_for_copies. Before sm_80 there is no such copy: a
// plain one, which waits for its load.
template <typename Vec>
__device__ __forceinline__ void copy_async(Vec* to, const Vec* from) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned int shared = static_cast<unsigned int>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared), "l"(from) : "memory");
#else
  *to = *from;
#endif
}

// Closes a group of this thread's copies.
__device__ __forceinline__ void commit_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// Waits until this thread's groups of copies have landed, all but the newest `pending`.
template <int pending>
__device__ __forceinline__ void wait_for_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(pending) : "memory");
#endif
}

// Block b is chunk b % chunks of group b / chunks; a group takes rows group, group + groups,
// ... The chunk owns vectors chunk·chunk_vecs + k·blockDim.x + t of each row, staged in
// shared memory as [2 rows][kVecs][blockDim.x]: a thread copies and reads only its own slots,
// so no barrier guards them.
//
//   chunk c of n_c columns sums S_c = Σx and M_c = Σ(x − S_c/n_c)² over its part; then
//   mean = Σ_c S_c / D and D·var = Σ_c M_c + n_c·(S_c/n_c − mean)²   (Chan et al.)
template <typename T, int kVec, int kVecs>
__global__ void __launch_bounds__(kSplitThreads)
layernorm_forward_split_kernel(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
                               T* __restrict__ y, acc_type_t<T>* __restrict__ mean_out,
                               acc_type_t<T>* __restrict__ rstd_out, int64_t rows, int cols, acc_type_t<T> eps,
                               int chunk_vecs, RowExchange exchange) {
  using acc_t = acc_type_t<T>;
  using Vec = AlignedVector<T, kVec>;
  extern __shared__ __align__(kVectorBytes) unsigned char shared_bytes[];
  Vec* staged = reinterpret_cast<Vec*>(shared_bytes);
  const int chunk = blockIdx.x % exchange.chunks;
  const int first_vec = chunk * chunk_vecs;
  const int vecs = min(chunk_vecs, cols / kVec - first_vec);  // this block's part of each row
  const Vec* gamma_vecs = reinterpret_cast<const Vec*>(gamma) + first_vec;
  const Vec* beta_vecs = reinterpret_cast<const Vec*>(beta) + first_vec;
  const int64_t row_step = gridDim.x / exchange.chunks;
  auto slot = [&](int buffer, int k) { return staged + (buffer * kVecs + k) * blockDim.x + threadIdx.x; };
  auto stage = [&](int buffer, int64_t row) {
    const Vec* x_row = reinterpret_cast<const Vec*>(x + row * cols) + first_vec;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (v < vecs) copy_async(slot(buffer, k), x_row + v);
    }
    commit_copies();
  };

  int64_t row = blockIdx.x / exchange.chunks;  // a launch has no more groups than rows
  stage(0, row);
  for (int buffer = 0; row < rows; row += row_step, buffer ^= 1) {
    if (row + row_step < rows) {
      stage(buffer ^ 1, row + row_step);  // the other buffer's row was written out last turn
    } else {
      commit_copies();  // an empty group, so that the wait below still means "this row's"
    }
    wait_for_copies<1>();

    acc_t sum = 0;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      if (k * blockDim.x + threadIdx.x < vecs) sum = add_elements(sum, *slot(buffer, k));
    }
    sum = block_reduce_sum(sum);
    const acc_t part_mean = sum / (vecs * kVec);
    acc_t squares = 0;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      if (k * blockDim.x + threadIdx.x < vecs) squares = add_squares(squares, *slot(buffer, k), part_mean);
    }
    squares = block_reduce_sum(squares);

    const float2* parts = exchange_partials(exchange, row, chunk, sum, squares);  // (S_c, M_c)
    sum = 0;
    for (int c = 0; c < exchange.chunks; ++c) sum += parts[c].x;
    const acc_t mean = sum / cols;
    squares = 0;
    for (int c = 0; c < exchange.chunks; ++c) {
      const int n = min(chunk_vecs, cols / kVec - c * chunk_vecs) * kVec;
      const acc_t off = parts[c].x / n - mean;
      squares += parts[c].y + n * off * off;
    }
    const acc_t rstd = rsqrt(squares / cols + eps);

    Vec* y_row = reinterpret_cast<Vec*>(y + row * cols) + first_vec;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (v < vecs) y_row[v] = normalized(*slot(buffer, k), gamma_vecs[v], beta_vecs[v], mean, rstd);
    }
    if (chunk == 0 && threadIdx.x == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

// A row longer than one block holds: split over blocks that are all on the GPU at once (as
// many groups of `chunks` blocks as fit), or version 3 where it cannot be. A block stages two
// rows of its chunk: as many threads as that leaves room for, up to kSplitThreads (a T4 gives
// a block 64 KB).
template <typename T>
cudaError_t launch_split(const T* x, const T* gamma, const T* beta, T* y, acc_type_t<T>* mean, acc_type_t<T>* rstd,
                         int64_t rows, int64_t cols, double eps, bool aligned, cudaStream_t stream) {
  constexpr int kVec = kVectorBytes / sizeof(T);
  constexpr int kStagedBytesPerThread = 2 * kSplitVecs * kVectorBytes;
  const auto kernel = &layernorm_forward_split_kernel<T, kVec, kSplitVecs>;
  const int room_threads =
      split_launch_supported() ? room_for_shared(kernel) / kStagedBytesPerThread / kWarpSize * kWarpSize : 0;
  const int threads = room_threads < kSplitThreads ? room_threads : kSplitThreads;
  const RowPlan plan = threads > 0 ? plan_split_rows(cols, sizeof(T), aligned, kSplitVecs, threads) : RowPlan{};
  const size_t shared = static_cast<size_t>(plan.threads_per_row) * kStagedBytesPerThread;
  const int64_t groups = plan.fits() ? blocks_at_once(kernel, plan.threads_per_row, shared) / plan.chunks : 0;
  if (groups == 0) return launch_layernorm_forward_vectorized(x, gamma, beta, y, mean, rstd, rows, cols, eps, stream);
  if (rows == 0) return cudaSuccess;
  RowExchange exchange;
  cudaError_t error = open_exchange(exchange, rows, plan.chunks, stream);
  if (error != cudaSuccess) return error;
  const int64_t used = rows < groups ? rows : groups;
  error = launch_cooperative(kernel, static_cast<int>(used * plan.chunks), dim3(plan.threads_per_row), shared, stream,
                             x, gamma, beta, y, mean, rstd, rows, static_cast<int>(cols),
                             static_cast<acc_type_t<T>>(eps), plan.chunk_vecs, exchange);
  const cudaError_t freed = close_exchange(exchange, stream);
  return error != cudaSuccess ? error : freed;
}

}  // namespace

template <typename T>
cudaError_t launch_layernorm_forward_registers(const T* x, const T* gamma, const T* beta, T* y,
                                               acc_type_t<T>* mean, acc_type_t<T>* rstd,
                                               int64_t rows, int64_t cols, double eps,
                                               cudaStream_t stream) {
  if constexpr (std::is_same_v<T, double>) {  // float64 is for gradcheck, not for speed
    return launch_layernorm_forward_vectorized(x, gamma, beta, y, mean, rstd, rows, cols, eps, stream);
  } else {
    const bool aligned = is_aligned(x) && is_aligned(gamma) && is_aligned(beta) && is_aligned(y);
    RowPlan plan = plan_rows(cols, sizeof(T), aligned, kMaxVecs, kMaxVecs, kMaxThreadsPerRow);
    if (!plan.fits()) plan = plan_rows(cols, sizeof(T), aligned, kMaxVecs, kMaxVecs, kWideThreadsPerRow);
    if (!plan.fits()) return launch_split(x, gamma, beta, y, mean, rstd, rows, cols, eps, aligned, stream);
    if (rows == 0) return cudaSuccess;
    const int64_t blocks_needed = (rows + plan.rows_per_block - 1) / plan.rows_per_block;
    const int blocks = static_cast<int>(blocks_needed < kMaxBlocks ? blocks_needed : kMaxBlocks);
    registers_kernel_for<T>(plan)<<<blocks, dim3(plan.threads_per_row, plan.rows_per_block), 0, stream>>>(
        x, gamma, beta, y, mean, rstd, rows, static_cast<int>(cols), static_cast<acc_type_t<T>>(eps));
    return cudaGetLastError();
  }
}

#define INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_REGISTERS(T)                                      \
  template cudaError_t launch_layernorm_forward_registers<T>(const T*, const T*, const T*, T*, \
                                                             acc_type_t<T>*, acc_type_t<T>*,    \
                                                             int64_t, int64_t, double,          \
                                                             cudaStream_t);
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_REGISTERS(__half)
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_REGISTERS(__nv_bfloat16)
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_REGISTERS(float)
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_REGISTERS(double)
