// What both kernel files share besides day 4's conversions (device_math.cuh): 16-byte
// vectors, and how a block of threads is laid over the columns.
#pragma once

#include "bias_gelu.h"
#include "device_math.cuh"  // to_acc, from_acc: day 4's conversions to and from acc_type_t

// N elements that load and store as one access: alignas makes the compiler emit a single
// ld.global.v4 / st.global.v4 for 16 bytes instead of N narrow ones. Only valid at an address
// that is a multiple of sizeof(AlignedVector). N = 1 is a plain element.
template <typename T, int N>
struct alignas(sizeof(T) * N) AlignedVector {
  T val[N];
};

// A block of `threads` threads over `vecs` vector columns: threadIdx.x along a row, up to a
// warp of it (a warp's loads then cover 32 neighbouring vectors, 512 contiguous bytes), and
// threadIdx.y over rows. Narrow rows give the warp's spare lanes to more rows instead.
inline dim3 block_over_columns(int vecs, int threads) {
  int width = 1;
  while (width < 32 && width < vecs) width *= 2;
  return dim3(width, threads / width);
}
