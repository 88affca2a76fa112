// GELU in the two forms torch.nn.functional.gelu offers, and its derivative gelu'(u) for the
// backward, written once for the CPU loops (bias_gelu.cpp) and for both kernels
// (bias_gelu_forward.cu, _backward.cu). Every function takes and returns the op-math type: float
// for float16, bfloat16 and float32 (16-bit values are widened first), double for float64.
//
// erf form, approximate="none" (exact):
//   gelu(u) = u·Φ(u),         Φ(u) = (1 + erf(u/√2)) / 2, the normal distribution's CDF
//                             φ(u) = exp(−u²/2) / √(2π),  its density
// tanh form, approximate="tanh" (Hendrycks and Gimpel's approximation of Φ):
//   gelu(u) = u·(1 + t) / 2,  t = tanh(a),  a = √(2/π)·(u + 0.044715·u³)
// gelu'(u) of each form is yours to derive (the lesson's section 3) and to write below, from
// the pieces gelu_detail holds: normal_pdf, normal_cdf, tanh_of, tanh_arg and the constants.
//
// Large |u| saturate instead of overflowing: erf and tanh of a large argument are exactly ±1 in
// floating point, so gelu(u) is exactly u or 0, and a derivative built from Φ, φ and t is
// exactly 1 or 0. Nothing on the way overflows: u³ for |u| = 1e4 is 1e12, and 65504³ (float16's
// largest) is 2.8e14, far inside float's range. A tanh written with exponentials,
// (e^2a − 1) / (e^2a + 1), would turn into inf / inf = NaN from a ≈ 44 on; exp(−u²/2) only
// underflows, to an exact 0.
//
// Φ in float does not call erff. erff picks one of two polynomials per element by |v|, and a
// warp whose elements fall on both sides runs both: in 16-bit dtypes, where an element moves
// only 4 bytes, that made the forward wait on instructions, not memory. Instead, one branch-free
// formula for the tail (Abramowitz and Stegun 7.1.26), with erfc(v) = 2·Φ(−v√2) for v >= 0:
//   Φ(−|u|) = ½·p(s)·s·exp(−u²/2),  s = 1 / (1 + 0.3275911·|u|/√2),  p a quartic,
//   Φ(u) = 1 − Φ(−|u|) for u >= 0,  error <= 7.5e-8 (erf's 1.5e-7, halved),
// about erff's own error for Φ near 1, better in the tail where 1 + erf(u/√2) would cancel.
// exp(−u²/2) is √(2π)·φ(u), so normal_cdf takes φ(u) and Φ and φ of one u share one
// exponential. Double keeps erf: gradcheck compares the backward with the forward's slopes to
// far below 7.5e-8.
#pragma once

#include <math.h>

#include "course_todo.h"  // the starter code's COURSE_TODO lines for the derivatives

#ifdef __CUDACC__
#define GELU_FUNCTION __host__ __device__ __forceinline__
#else
#define GELU_FUNCTION inline
#endif

enum class GeluForm { kErf, kTanh };  // approximate="none", approximate="tanh"

namespace gelu_detail {

constexpr double kSqrtHalf = 0.70710678118654752440;     // 1/√2
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/√(2π)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // √(2/π)
constexpr double kCubic = 0.044715;                      // the tanh form's coefficient of u³
constexpr double kSqrt2Pi = 2.50662827463100050242;      // √(2π)
// Abramowitz and Stegun 7.1.26: erfc(v) ≈ (a1·s + a2·s² + a3·s³ + a4·s⁴ + a5·s⁵)·exp(−v²),
// s = 1 / (1 + kTailP·v), for v >= 0.
constexpr float kTailP = 0.3275911f;
constexpr float kTailA1 = 0.254829592f, kTailA2 = -0.284496736f, kTailA3 = 1.421413741f, kTailA4 = -1.453152027f,
                kTailA5 = 1.061405429f;

// tanhf for float, tanh and exp for double: on the host from <math.h>, on the GPU CUDA's own
// (the same names). A float argument never goes through the double ones.
GELU_FUNCTION float tanh_of(float v) { return tanhf(v); }
GELU_FUNCTION double tanh_of(double v) { return tanh(v); }
GELU_FUNCTION double exp_of(double v) { return exp(v); }

// exp(v) for v <= 0. On the GPU the hardware's exp2 of v·log2(e): expf adds a range reduction
// for an accuracy (1 ulp) that Φ's tail formula, off by up to 7.5e-8 of 1, cannot use.
GELU_FUNCTION float exp_of(float v) {
#ifdef __CUDA_ARCH__
  return __expf(v);
#else
  return expf(v);
#endif
}

// 1/v for v >= 1. On the GPU the hardware's approximate reciprocal: 1.0f / v would be an IEEE
// division, a call with branches for cases (denormals, huge v) that cannot occur here.
GELU_FUNCTION float reciprocal(float v) {
#ifdef __CUDA_ARCH__
  return __fdividef(1.0f, v);
#else
  return 1.0f / v;
#endif
}

// φ(u), the standard normal density.
template <typename acc_t>
GELU_FUNCTION acc_t normal_pdf(acc_t u) {
  return acc_t(kInvSqrt2Pi) * exp_of(acc_t(-0.5) * u * u);
}

// Φ(u), given pdf = φ(u). Float: the branch-free tail formula above, from φ's exponential.
GELU_FUNCTION float normal_cdf(float u, float pdf) {
  const float s = reciprocal(1.0f + kTailP * (fabsf(u) * float(kSqrtHalf)));
  const float p = (((kTailA5 * s + kTailA4) * s + kTailA3) * s + kTailA2) * s + kTailA1;
  const float lower_tail = 0.5f * p * s * (float(kSqrt2Pi) * pdf);  // Φ(−|u|)
  return u >= 0.0f ? 1.0f - lower_tail : lower_tail;
}

GELU_FUNCTION double normal_cdf(double u, double /*pdf*/) {
  return 0.5 * (1.0 + erf(u * kSqrtHalf));
}

template <typename acc_t>
GELU_FUNCTION acc_t tanh_arg(acc_t u) {
  return acc_t(kSqrt2OverPi) * (u + acc_t(kCubic) * u * u * u);
}

}  // namespace gelu_detail

template <typename acc_t>
GELU_FUNCTION acc_t gelu_erf(acc_t u) {
  using namespace gelu_detail;
  return u * normal_cdf(u, normal_pdf(u));
}

// BEGIN SOLUTION
// gelu'(u) = Φ(u) + u·φ(u): the product rule on u·Φ(u), with Φ' = φ.
template <typename acc_t>
GELU_FUNCTION acc_t gelu_erf_grad(acc_t u) {
  using namespace gelu_detail;
  const acc_t pdf = normal_pdf(u);
  return normal_cdf(u, pdf) + u * pdf;
}
// STUB
COURSE_TODO("day06: gelu_math.h, gelu_erf_grad: return gelu'(u) of the erf form, d/du of u*Phi(u), from normal_cdf and normal_pdf, then delete this line");

template <typename acc_t>
GELU_FUNCTION acc_t gelu_erf_grad(acc_t u) {
  // TODO(day06): gelu'(u) of u·Φ(u): the product rule, with Φ' = φ (normal_pdf)
  return acc_t(0);
}
// END SOLUTION

template <typename acc_t>
GELU_FUNCTION acc_t gelu_tanh(acc_t u) {
  using namespace gelu_detail;
  return acc_t(0.5) * u * (acc_t(1) + tanh_of(tanh_arg(u)));
}

// BEGIN SOLUTION
// gelu'(u) = (1 + t)/2 + u·(1 − t²)/2 · a'(u),  a'(u) = √(2/π)·(1 + 3·0.044715·u²): the product
// rule on u·(1 + t)/2, with tanh' = 1 − tanh² and the chain rule through a(u).
template <typename acc_t>
GELU_FUNCTION acc_t gelu_tanh_grad(acc_t u) {
  using namespace gelu_detail;
  const acc_t t = tanh_of(tanh_arg(u));
  const acc_t arg_grad = acc_t(kSqrt2OverPi) * (acc_t(1) + acc_t(3 * kCubic) * u * u);
  return acc_t(0.5) * (acc_t(1) + t) + acc_t(0.5) * u * (acc_t(1) - t * t) * arg_grad;
}
// STUB
COURSE_TODO("day06: gelu_math.h, gelu_tanh_grad: return gelu'(u) of the tanh form, d/du of u*(1 + t)/2, from tanh_of, tanh_arg, kSqrt2OverPi and kCubic, then delete this line");

template <typename acc_t>
GELU_FUNCTION acc_t gelu_tanh_grad(acc_t u) {
  // TODO(day06): gelu'(u) of u·(1 + t)/2: the product rule, tanh' = 1 − tanh², the chain rule through a(u)
  return acc_t(0);
}
// END SOLUTION

// The form chosen at compile time: a kernel is instantiated once per form, so no element
// pays for a branch, and the compiler never evaluates both forms to pick one.
template <GeluForm kForm, typename acc_t>
GELU_FUNCTION acc_t gelu(acc_t u) {
  return kForm == GeluForm::kTanh ? gelu_tanh(u) : gelu_erf(u);
}

template <GeluForm kForm, typename acc_t>
GELU_FUNCTION acc_t gelu_grad(acc_t u) {
  return kForm == GeluForm::kTanh ? gelu_tanh_grad(u) : gelu_erf_grad(u);
}
