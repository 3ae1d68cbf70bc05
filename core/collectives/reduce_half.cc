#include "core/collectives/reduce_half.h"

#include <cstdint>

#include "core/common/half.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define HVD_HAVE_F16C_PATH 1
#endif

namespace hvd::collectives::internal {
namespace {

// Same operand order as the integer/float kernels in reduce.cc, so NaN and
// signed-zero handling agree across types.
struct Sum {
  static float Apply(float a, float b) { return a + b; }
};
struct Product {
  static float Apply(float a, float b) { return a * b; }
};
struct Min {
  static float Apply(float a, float b) { return b < a ? b : a; }
};
struct Max {
  static float Apply(float a, float b) { return a < b ? b : a; }
};

struct Float16 {
  static float ToFloat(uint16_t h) { return HalfToFloat(h); }
  static uint16_t FromFloat(float f) { return FloatToHalf(f); }
};
struct BFloat16 {
  static float ToFloat(uint16_t b) { return BFloat16ToFloat(b); }
  static uint16_t FromFloat(float f) { return FloatToBFloat16(f); }
};

template <typename Format, typename Op>
void Loop(void* dst_bytes, const void* src_bytes, size_t count) {
  uint16_t* __restrict dst = static_cast<uint16_t*>(dst_bytes);
  const uint16_t* __restrict src = static_cast<const uint16_t*>(src_bytes);
  for (size_t i = 0; i < count; ++i) {
    dst[i] = Format::FromFloat(
        Op::Apply(Format::ToFloat(dst[i]), Format::ToFloat(src[i])));
  }
}

template <typename Format>
void ReduceScalar(void* dst, const void* src, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return Loop<Format, Sum>(dst, src, count);
    case ReduceOp::kProduct:
      return Loop<Format, Product>(dst, src, count);
    case ReduceOp::kMin:
      return Loop<Format, Min>(dst, src, count);
    case ReduceOp::kMax:
      return Loop<Format, Max>(dst, src, count);
    case ReduceOp::kAdasum:
      return;
  }
}

template <typename Format>
void ScaleScalar(void* bytes, size_t count, float factor) {
  uint16_t* data = static_cast<uint16_t*>(bytes);
  for (size_t i = 0; i < count; ++i) {
    data[i] = Format::FromFloat(Format::ToFloat(data[i]) * factor);
  }
}

template <typename Format>
void DivideScalar(void* bytes, size_t count, float divisor) {
  uint16_t* data = static_cast<uint16_t*>(bytes);
  for (size_t i = 0; i < count; ++i) {
    data[i] = Format::FromFloat(Format::ToFloat(data[i]) / divisor);
  }
}

#ifdef HVD_HAVE_F16C_PATH
// The portable float16 conversion branches on subnormals and does not
// vectorise; where the CPU has F16C, convert 8 lanes per instruction. Both
// round to nearest even, so results are bit-identical to the scalar path
// (NaN payloads aside).
#define HVD_F16C __attribute__((target("avx,f16c")))

HVD_F16C __m256 Apply8(__m256 a, __m256 b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kProduct:
      return _mm256_mul_ps(a, b);
    case ReduceOp::kMin:
      return _mm256_min_ps(b, a);  // b < a ? b : a
    case ReduceOp::kMax:
      return _mm256_max_ps(b, a);  // b > a ? b : a
    default:
      return _mm256_add_ps(a, b);
  }
}

HVD_F16C void ReduceFloat16F16c(void* dst_bytes, const void* src_bytes,
                                size_t count, ReduceOp op) {
  uint16_t* dst = static_cast<uint16_t*>(dst_bytes);
  const uint16_t* src = static_cast<const uint16_t*>(src_bytes);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 a = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(dst + i)));
    const __m256 b = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(dst + i),
        _mm256_cvtps_ph(Apply8(a, b, op), _MM_FROUND_TO_NEAREST_INT));
  }
  ReduceScalar<Float16>(dst + i, src + i, count - i, op);
}

HVD_F16C void ScaleFloat16F16c(void* bytes, size_t count, float factor) {
  uint16_t* data = static_cast<uint16_t*>(bytes);
  const __m256 f = _mm256_set1_ps(factor);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m128i* p = reinterpret_cast<__m128i*>(data + i);
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(p));
    _mm_storeu_si128(
        p, _mm256_cvtps_ph(_mm256_mul_ps(a, f), _MM_FROUND_TO_NEAREST_INT));
  }
  ScaleScalar<Float16>(data + i, count - i, factor);
}

// F16C is CPUID leaf 1, ECX bit 29 (asked directly: clang's
// __builtin_cpu_supports does not know "f16c"); AVX also needs the OS to
// save its registers, which __builtin_cpu_supports("avx") checks.
bool HasF16c() {
  static const bool has = [] {
    unsigned eax, ebx, ecx, edx;
    return __builtin_cpu_supports("avx") &&
           __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  }();
  return has;
}

// bfloat16 converts with integer shifts, which the compiler vectorises by
// itself; compiled for AVX2 it does 8 lanes at a time instead of 4.
template <typename Op>
__attribute__((target("avx2"))) void BFloat16LoopAvx2(void* dst_bytes,
                                                      const void* src_bytes,
                                                      size_t count) {
  uint16_t* __restrict dst = static_cast<uint16_t*>(dst_bytes);
  const uint16_t* __restrict src = static_cast<const uint16_t*>(src_bytes);
  for (size_t i = 0; i < count; ++i) {
    dst[i] = BFloat16::FromFloat(
        Op::Apply(BFloat16::ToFloat(dst[i]), BFloat16::ToFloat(src[i])));
  }
}

void ReduceBFloat16Avx2(void* dst, const void* src, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kProduct:
      return BFloat16LoopAvx2<Product>(dst, src, count);
    case ReduceOp::kMin:
      return BFloat16LoopAvx2<Min>(dst, src, count);
    case ReduceOp::kMax:
      return BFloat16LoopAvx2<Max>(dst, src, count);
    default:
      return BFloat16LoopAvx2<Sum>(dst, src, count);
  }
}

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif  // HVD_HAVE_F16C_PATH

}  // namespace

void ReduceFloat16(void* dst, const void* src, size_t count, ReduceOp op) {
#ifdef HVD_HAVE_F16C_PATH
  if (HasF16c()) return ReduceFloat16F16c(dst, src, count, op);
#endif
  ReduceScalar<Float16>(dst, src, count, op);
}

void ReduceBFloat16(void* dst, const void* src, size_t count, ReduceOp op) {
#ifdef HVD_HAVE_F16C_PATH
  if (HasAvx2()) return ReduceBFloat16Avx2(dst, src, count, op);
#endif
  ReduceScalar<BFloat16>(dst, src, count, op);
}

void ScaleFloat16(void* data, size_t count, float factor) {
#ifdef HVD_HAVE_F16C_PATH
  if (HasF16c()) return ScaleFloat16F16c(data, count, factor);
#endif
  ScaleScalar<Float16>(data, count, factor);
}

void ScaleBFloat16(void* data, size_t count, float factor) {
  ScaleScalar<BFloat16>(data, count, factor);
}

void DivideFloat16(void* data, size_t count, float divisor) {
  DivideScalar<Float16>(data, count, divisor);
}

void DivideBFloat16(void* data, size_t count, float divisor) {
  DivideScalar<BFloat16>(data, count, divisor);
}

}  // namespace hvd::collectives::internal
