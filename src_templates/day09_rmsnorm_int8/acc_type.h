// The type arithmetic runs in for each element type: host and device code, and every unit
// from day 4 on (day 6's GELU too), name it acc_type_t<T>.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// The type every sum runs in, and the type of mean and rstd. fp16 keeps 11 significant bits
// and bf16 8: once a running sum is a few hundred times larger than the next element, that
// element's last bits round away. So the half types accumulate in float, as PyTorch's own
// kernels do; float stays float and double double. Only these four element types exist here.
template <typename T>
struct AccumulateType;
template <>
struct AccumulateType<__half> { using type = float; };
template <>
struct AccumulateType<__nv_bfloat16> { using type = float; };
template <>
struct AccumulateType<float> { using type = float; };
template <>
struct AccumulateType<double> { using type = double; };

template <typename T>
using acc_type_t = typename AccumulateType<T>::type;
