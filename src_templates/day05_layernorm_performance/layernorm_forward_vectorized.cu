// LayerNorm forward, version 3: version 2 with 16-byte loads and stores.
//
// A warp reading 32 neighbouring floats issues one 4-byte load per lane: 128 bytes per
// instruction. Reading AlignedVector<float, 4> issues one 16-byte load per lane: 512 bytes per
// instruction, a quarter of the load instructions, address computations and loop trips for the
// same bytes. For fp16 and bf16 a vector holds 8 elements, so the saving is eightfold. More
// bytes in flight per instruction is what keeps the memory system busy.
//
// The catch: a 16-byte access must start at a multiple of 16 bytes. Every row starts on a
// vector boundary only if D is a multiple of the vector length and x, y, gamma and beta are
// 16-byte aligned (x[1:] of a float tensor is not). Anything else takes version 2.
#include "course_todo.h"
#include "row_math.cuh"

namespace {

COURSE_TODO("day05: layernorm_forward_vectorized.cu, layernorm_forward_vectorized_kernel: version 2 reading and writing whole vectors, the vector width and the block yours to choose, then delete this line");
template <typename T>
__global__ void layernorm_forward_vectorized_kernel(const T* __restrict__ x,
                                                    const T* __restrict__ gamma,
                                                    const T* __restrict__ beta, T* __restrict__ y,
                                                    acc_type_t<T>* __restrict__ mean_out,
                                                    acc_type_t<T>* __restrict__ rstd_out,
                                                    int64_t rows, int cols, acc_type_t<T> eps) {
  using acc_t = acc_type_t<T>;
  // TODO(day05): version 2's kernel, reading x, gamma and beta and writing y as whole vectors
  // (AlignedVector<T, N>, row_math.cuh: one load or store instruction each). Yours to decide:
  // the vector width N (at most kVectorBytes = 16 bytes: the widest access a thread has) and,
  // as in version 2, the block's rows and which warp takes which row. What must hold:
  //   - the launcher below sends here only rows that are whole vectors at aligned addresses:
  //     cols % N == 0, and x, gamma, beta and y aligned to the vector's size;
  //   - every row done by one warp whatever the grid, all 32 lanes in every warp_reduce_sum;
  //   - neighbouring lanes read neighbouring vectors, up to the row's last vector;
  //   - each element widened to acc_t, as in version 2; one lane writes mean_out and rstd_out.
}

}  // namespace

COURSE_TODO("day05: layernorm_forward_vectorized.cu, launch_layernorm_forward_vectorized: launch the kernel for rows that are whole aligned vectors, hand the others to version 2, then delete this line");
template <typename T>
cudaError_t launch_layernorm_forward_vectorized(const T* x, const T* gamma, const T* beta, T* y,
                                                acc_type_t<T>* mean, acc_type_t<T>* rstd,
                                                int64_t rows, int64_t cols, double eps,
                                                cudaStream_t stream) {
  // TODO(day05): launch layernorm_forward_vectorized_kernel<T> on `stream` for the rows your
  // kernel can take, with the block and grid it expects, and return cudaGetLastError(); every
  // other input goes to version 2: return launch_layernorm_forward_warp(...) with the same
  // arguments. A 16-byte access at an address that is not a multiple of 16 is not slow, it is
  // a crash ("misaligned address") that loses the CUDA context: check cols against your vector
  // width and x, gamma, beta and y with is_aligned (layernorm_fast.h) before launching. As in
  // version 2: whole warps, at most 1024 threads a block, no launch for rows == 0, and a kernel
  // that loops where the grid holds fewer warps than there are rows. The perf case times this
  // launch at 16384 x 1024 fp32.
  return cudaErrorNotYetImplemented;
}

#define INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_VECTORIZED(T)                                      \
  template cudaError_t launch_layernorm_forward_vectorized<T>(const T*, const T*, const T*, T*, \
                                                              acc_type_t<T>*, acc_type_t<T>*,    \
                                                              int64_t, int64_t, double,          \
                                                              cudaStream_t);
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_VECTORIZED(__half)
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_VECTORIZED(__nv_bfloat16)
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_VECTORIZED(float)
INSTANTIATE_LAUNCH_LAYERNORM_FORWARD_VECTORIZED(double)
