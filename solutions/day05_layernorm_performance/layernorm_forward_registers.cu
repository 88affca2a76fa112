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
// ones (sums through shared memory). Each thread holds at most kMaxVecs vectors, 128 bytes:
// 32 registers whatever the dtype, because the vectors stay in T and are widened to acc_t only
// when used. Rows that are not whole aligned vectors (unless D <= 32) take version 3.
//
// Rows longer than a block can hold (D > 16384 in fp32, 32768 in 16 bits) are split over
// several blocks side by side (plan_split_rows), each holding its chunk in registers as above.
// Each chunk sums its part, and the chunks meet once per row in global memory (row_math.cuh)
// to combine their sums; then each writes its part of y. The row is still read once.
//
// Why 512 and not 1024 threads: __launch_bounds__(1024) caps a thread at 64 registers, and
// the bf16 instance holding 8 vectors then spills (nvcc -Xptxas -v: 344 bytes of spill loads),
// which made bf16 rows of 4096 and more run at half the bandwidth of fp16 ones. At 512 a
// thread may use 128.
//
//   mean = Σx / D, var = Σ(x − mean)² / D over the registers, y = (x − mean)·rstd·γ + β
//   split: chunk c of n_c columns sums S_c = Σx and M_c = Σ(x − S_c/n_c)² over its part; then
//          mean = Σ_c S_c / D and D·var = Σ_c M_c + n_c·(S_c/n_c − mean)²   (Chan et al.)
#include <type_traits>

#include "row_math.cuh"

namespace {

constexpr int kMaxVecs = 8;             // vectors per thread: 128 bytes of the row
constexpr int kMaxThreadsPerRow = 512;
constexpr int kSplitThreads = 512;  // a split row's blocks: fewer chunks wait on each other than at 256
constexpr int64_t kMaxBlocks = 65535;

// Block (threads_per_row, rows_per_block); thread (t, r) owns vectors t, t + threads_per_row,
// ... of row r of the block's current group of rows. A split row: block b is chunk
// b % chunks of its group b / chunks, and owns vectors chunk·chunk_vecs + t, + threads_per_row, ...
template <typename T, int kVec, int kVecsPerThread>
__global__ void __launch_bounds__(kMaxThreadsPerRow)
layernorm_forward_registers_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                   const T* __restrict__ beta, T* __restrict__ y,
                                   acc_type_t<T>* __restrict__ mean_out,
                                   acc_type_t<T>* __restrict__ rstd_out, int64_t rows, int cols,
                                   acc_type_t<T> eps, int chunk_vecs, RowExchange exchange) {
  using acc_t = acc_type_t<T>;
  using Vec = AlignedVector<T, kVec>;
  const int chunk = blockIdx.x % exchange.chunks;
  const int first_vec = chunk * chunk_vecs;
  const int vecs = min(chunk_vecs, cols / kVec - first_vec);  // this block's part of the row
  const int part_cols = vecs * kVec;
  const Vec* gamma_vecs = reinterpret_cast<const Vec*>(gamma) + first_vec;
  const Vec* beta_vecs = reinterpret_cast<const Vec*>(beta) + first_vec;
  const int64_t row_step = static_cast<int64_t>(gridDim.x / exchange.chunks) * blockDim.y;
  // The loop runs the same number of times for the whole block: a thread past the last row
  // stays, holding nothing, so that the shuffles and barriers of the sums find everyone.
  for (int64_t first_row = static_cast<int64_t>(blockIdx.x / exchange.chunks) * blockDim.y; first_row < rows;
       first_row += row_step) {
    const int64_t row = first_row + threadIdx.y;
    const bool active = row < rows;
    const Vec* x_row = reinterpret_cast<const Vec*>(x + row * cols) + first_vec;
    Vec* y_row = reinterpret_cast<Vec*>(y + row * cols) + first_vec;

    Vec held[kVecsPerThread];
    acc_t sum = 0;
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (active && v < vecs) {
        held[k] = x_row[v];  // every load is issued before any sum needs one
#pragma unroll
        for (int e = 0; e < kVec; ++e) sum += to_acc(held[k].val[e]);
      }
    }
    sum = row_reduce_sum(sum);
    const acc_t part_mean = sum / part_cols;

    acc_t squares = 0;
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (active && v < vecs) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const acc_t centered = to_acc(held[k].val[e]) - part_mean;
          squares += centered * centered;
        }
      }
    }
    squares = row_reduce_sum(squares);
    acc_t mean = part_mean;
    // Only the widest instance is ever split (launch_split), and acc_t is float: float64 never
    // splits. Left out of the other instances, the exchange's code cannot crowd their registers.
    if (kVecsPerThread == kMaxVecs && exchange.chunks > 1) {
      if (row + row_step < rows) {
        const Vec* next_row = x_row + row_step * (cols / kVec);
#pragma unroll 1
        for (int v = threadIdx.x; v < vecs; v += blockDim.x) prefetch_to_l2(next_row + v);
      }
      const float2* parts = exchange_partials(exchange, row, chunk, sum, squares);  // (S_c, M_c)
      sum = 0;
      for (int c = 0; c < exchange.chunks; ++c) sum += parts[c].x;
      mean = sum / cols;
      squares = 0;
      for (int c = 0; c < exchange.chunks; ++c) {
        const int n = min(chunk_vecs, cols / kVec - c * chunk_vecs) * kVec;
        const acc_t off = parts[c].x / n - mean;
        squares += parts[c].y + n * off * off;
      }
    }
    const acc_t rstd = rsqrt(squares / cols + eps);

#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (active && v < vecs) {
        const Vec g = gamma_vecs[v];
        const Vec b = beta_vecs[v];
        Vec out;
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const acc_t xhat = (to_acc(held[k].val[e]) - mean) * rstd;
          out.val[e] = from_acc<T>(xhat * to_acc(g.val[e]) + to_acc(b.val[e]));
        }
        y_row[v] = out;
      }
    }
    if (active && chunk == 0 && threadIdx.x == 0) {
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
  switch (plan.vecs_per_thread) {
    case 1: return &layernorm_forward_registers_kernel<T, kVec, 1>;
    case 2: return &layernorm_forward_registers_kernel<T, kVec, 2>;
    case 4: return &layernorm_forward_registers_kernel<T, kVec, 4>;
    default: return &layernorm_forward_registers_kernel<T, kVec, kMaxVecs>;
  }
}

// A row longer than one block holds: split over blocks that are all on the GPU at once (as
// many groups of `chunks` blocks as fit), or version 3 where it cannot be.
template <typename T>
cudaError_t launch_split(const T* x, const T* gamma, const T* beta, T* y, acc_type_t<T>* mean, acc_type_t<T>* rstd,
                         int64_t rows, int64_t cols, double eps, bool aligned, cudaStream_t stream) {
  const RowPlan plan = plan_split_rows(cols, sizeof(T), aligned, kMaxVecs, kSplitThreads);
  const RegistersKernel<T> kernel = registers_kernel_for<T>(plan);
  const int64_t groups = plan.fits() && split_launch_supported()
                             ? blocks_at_once(kernel, plan.threads_per_row, 0) / plan.chunks : 0;
  if (groups == 0) return launch_layernorm_forward_vectorized(x, gamma, beta, y, mean, rstd, rows, cols, eps, stream);
  if (rows == 0) return cudaSuccess;
  RowExchange exchange;
  cudaError_t error = open_exchange(exchange, rows, plan.chunks, stream);
  if (error != cudaSuccess) return error;
  const int64_t used = rows < groups ? rows : groups;
  error = launch_cooperative(kernel, static_cast<int>(used * plan.chunks), dim3(plan.threads_per_row), 0, stream, x,
                             gamma, beta, y, mean, rstd, rows, static_cast<int>(cols),
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
    const RowPlan plan = plan_rows(cols, sizeof(T), aligned, kMaxVecs, kMaxVecs, kMaxThreadsPerRow);
    if (!plan.fits()) return launch_split(x, gamma, beta, y, mean, rstd, rows, cols, eps, aligned, stream);
    if (rows == 0) return cudaSuccess;
    const int64_t blocks_needed = (rows + plan.rows_per_block - 1) / plan.rows_per_block;
    const int blocks = static_cast<int>(blocks_needed < kMaxBlocks ? blocks_needed : kMaxBlocks);
    registers_kernel_for<T>(plan)<<<blocks, dim3(plan.threads_per_row, plan.rows_per_block), 0, stream>>>(
        x, gamma, beta, y, mean, rstd, rows, static_cast<int>(cols), static_cast<acc_type_t<T>>(eps),
        static_cast<int>(cols / plan.vec), RowExchange{});
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
