// What both kernel files use besides day02's sums (reductions.cuh): values moved between the
// element type and the accumulation type.
#pragma once

#include "acc_type.h"

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
