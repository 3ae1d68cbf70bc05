#include "core/collectives/reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/collectives/reduce_half.h"

namespace hvd::collectives {
namespace {

// Integer arithmetic runs in an unsigned type at least as wide as int, so that
// overflow wraps instead of being UB (uint16 * uint16 would promote to int).
template <typename T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(uint32_t)), uint32_t,
                                std::make_unsigned_t<T>>;

template <typename T>
struct SumOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
    } else {
      return a + b;
    }
  }
};

template <typename T>
struct ProductOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
    } else {
      return a * b;
    }
  }
};

template <typename T>
struct MinOp {
  static T Apply(T a, T b) { return b < a ? b : a; }
};

template <typename T>
struct MaxOp {
  static T Apply(T a, T b) { return a < b ? b : a; }
};

// One loop per (type, op): __restrict and a branch-free body let -O3 turn it
// into SIMD code.
template <typename T, typename Op>
void Loop(void* dst_bytes, const void* src_bytes, size_t count) {
  T* __restrict dst = static_cast<T*>(dst_bytes);
  const T* __restrict src = static_cast<const T*>(src_bytes);
  for (size_t i = 0; i < count; ++i) dst[i] = Op::Apply(dst[i], src[i]);
}

template <typename T>
void ReduceTyped(void* dst, const void* src, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return Loop<T, SumOp<T>>(dst, src, count);
    case ReduceOp::kProduct:
      return Loop<T, ProductOp<T>>(dst, src, count);
    case ReduceOp::kMin:
      return Loop<T, MinOp<T>>(dst, src, count);
    case ReduceOp::kMax:
      return Loop<T, MaxOp<T>>(dst, src, count);
    case ReduceOp::kAdasum:
      return;
  }
}

// Bool bytes may hold any non-zero value for true: normalise while combining.
void ReduceBool(void* dst_bytes, const void* src_bytes, size_t count,
                ReduceOp op) {
  uint8_t* __restrict dst = static_cast<uint8_t*>(dst_bytes);
  const uint8_t* __restrict src = static_cast<const uint8_t*>(src_bytes);
  const bool is_or =
      op == ReduceOp::kSum || op == ReduceOp::kAverage || op == ReduceOp::kMax;
  if (is_or) {
    for (size_t i = 0; i < count; ++i) dst[i] = (dst[i] | src[i]) != 0;
  } else {
    for (size_t i = 0; i < count; ++i) dst[i] = (dst[i] != 0) & (src[i] != 0);
  }
}

// double -> integer conversion of an out-of-range value is UB: saturate, and
// map NaN to zero.
template <typename T>
T SaturatingCast(double value) {
  if (!(value == value)) return 0;
  constexpr double kLow = static_cast<double>(std::numeric_limits<T>::min());
  constexpr double kHigh = static_cast<double>(std::numeric_limits<T>::max());
  if (value <= kLow) return std::numeric_limits<T>::min();
  if (value >= kHigh) return std::numeric_limits<T>::max();
  return static_cast<T>(value);  // Truncates toward zero.
}

template <typename T>
void ScaleTyped(void* bytes, size_t count, double factor) {
  T* __restrict data = static_cast<T*>(bytes);
  if constexpr (std::is_integral_v<T>) {
    for (size_t i = 0; i < count; ++i) {
      data[i] = SaturatingCast<T>(static_cast<double>(data[i]) * factor);
    }
  } else {
    // In the tensor's own type, the factor rounded to it first: float32
    // tensors are scaled in float arithmetic, as Horovod does, so results
    // match Horovod's bit for bit (a product in double rounded once to
    // float can differ in the last bit).
    const T f = static_cast<T>(factor);
    for (size_t i = 0; i < count; ++i) data[i] = data[i] * f;
  }
}

template <typename T>
void DivideTyped(void* bytes, size_t count, int divisor) {
  T* __restrict data = static_cast<T*>(bytes);
  const T d = static_cast<T>(divisor);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<T>(data[i] / d);
}

// dst[i] = (dst[i] + src[i]) * factor / divisor, rounded as Loop<SumOp>,
// ScaleTyped and DivideTyped round it: the sum to T, the product in T, the
// quotient in T.
template <typename T>
void SumScaleLoop(void* dst_bytes, const void* src_bytes, size_t count,
                  double factor, int divisor) {
  T* __restrict dst = static_cast<T*>(dst_bytes);
  const T* __restrict src = static_cast<const T*>(src_bytes);
  const T f = static_cast<T>(factor);
  const T d = static_cast<T>(divisor);
  if (divisor == 1) {
    for (size_t i = 0; i < count; ++i) dst[i] = (dst[i] + src[i]) * f;
  } else if (factor == 1.0) {
    for (size_t i = 0; i < count; ++i) dst[i] = (dst[i] + src[i]) / d;
  } else {
    for (size_t i = 0; i < count; ++i) dst[i] = (dst[i] + src[i]) * f / d;
  }
}

template <typename T>
void SumIntoLoop(void* dst_bytes, const void* own_bytes, const void* src_bytes,
                 size_t count) {
  T* __restrict dst = static_cast<T*>(dst_bytes);
  const T* __restrict own = static_cast<const T*>(own_bytes);
  const T* __restrict src = static_cast<const T*>(src_bytes);
  for (size_t i = 0; i < count; ++i) dst[i] = own[i] + src[i];
}

void ScaleBool(void* bytes, size_t count, double factor) {
  uint8_t* data = static_cast<uint8_t*>(bytes);
  const uint8_t keep = factor != 0.0;
  for (size_t i = 0; i < count; ++i) data[i] = (data[i] != 0) & keep;
}

}  // namespace

void Reduce(void* dst, const void* src, size_t count, DataType dtype,
            ReduceOp op) {
  switch (dtype) {
    case DataType::kUint8:
      return ReduceTyped<uint8_t>(dst, src, count, op);
    case DataType::kInt8:
      return ReduceTyped<int8_t>(dst, src, count, op);
    case DataType::kUint16:
      return ReduceTyped<uint16_t>(dst, src, count, op);
    case DataType::kInt16:
      return ReduceTyped<int16_t>(dst, src, count, op);
    case DataType::kInt32:
      return ReduceTyped<int32_t>(dst, src, count, op);
    case DataType::kInt64:
      return ReduceTyped<int64_t>(dst, src, count, op);
    case DataType::kFloat32:
      return ReduceTyped<float>(dst, src, count, op);
    case DataType::kFloat64:
      return ReduceTyped<double>(dst, src, count, op);
    case DataType::kFloat16:
      return internal::ReduceFloat16(dst, src, count, op);
    case DataType::kBFloat16:
      return internal::ReduceBFloat16(dst, src, count, op);
    case DataType::kBool:
      return ReduceBool(dst, src, count, op);
  }
}

void ReduceAndScale(void* dst, const void* src, size_t count, DataType dtype,
                    ReduceOp op, double factor, int divisor) {
  if (op == ReduceOp::kSum && dtype == DataType::kFloat32) {
    return SumScaleLoop<float>(dst, src, count, factor, divisor);
  }
  if (op == ReduceOp::kSum && dtype == DataType::kFloat64) {
    return SumScaleLoop<double>(dst, src, count, factor, divisor);
  }
  Reduce(dst, src, count, dtype, op);
  Postscale(dst, count, dtype, factor, divisor);
}

void ReduceInto(void* dst, const void* own, const void* src, size_t count,
                DataType dtype, ReduceOp op) {
  if (op == ReduceOp::kSum && dtype == DataType::kFloat32) {
    return SumIntoLoop<float>(dst, own, src, count);
  }
  if (op == ReduceOp::kSum && dtype == DataType::kFloat64) {
    return SumIntoLoop<double>(dst, own, src, count);
  }
  if (count > 0) std::memcpy(dst, own, count * DataTypeSize(dtype));
  Reduce(dst, src, count, dtype, op);
}

void Postscale(void* data, size_t count, DataType dtype, double factor,
               int divisor) {
  if (factor != 1.0) Scale(data, count, dtype, factor);
  if (divisor != 1) Divide(data, count, dtype, divisor);
}

void Divide(void* data, size_t count, DataType dtype, int divisor) {
  switch (dtype) {
    case DataType::kUint8:
      return DivideTyped<uint8_t>(data, count, divisor);
    case DataType::kInt8:
      return DivideTyped<int8_t>(data, count, divisor);
    case DataType::kUint16:
      return DivideTyped<uint16_t>(data, count, divisor);
    case DataType::kInt16:
      return DivideTyped<int16_t>(data, count, divisor);
    case DataType::kInt32:
      return DivideTyped<int32_t>(data, count, divisor);
    case DataType::kInt64:
      return DivideTyped<int64_t>(data, count, divisor);
    case DataType::kFloat32:
      return DivideTyped<float>(data, count, divisor);
    case DataType::kFloat64:
      return DivideTyped<double>(data, count, divisor);
    case DataType::kFloat16:
      return internal::DivideFloat16(data, count, static_cast<float>(divisor));
    case DataType::kBFloat16:
      return internal::DivideBFloat16(data, count,
                                      static_cast<float>(divisor));
    case DataType::kBool:
      return;
  }
}

void Scale(void* data, size_t count, DataType dtype, double factor) {
  switch (dtype) {
    case DataType::kUint8:
      return ScaleTyped<uint8_t>(data, count, factor);
    case DataType::kInt8:
      return ScaleTyped<int8_t>(data, count, factor);
    case DataType::kUint16:
      return ScaleTyped<uint16_t>(data, count, factor);
    case DataType::kInt16:
      return ScaleTyped<int16_t>(data, count, factor);
    case DataType::kInt32:
      return ScaleTyped<int32_t>(data, count, factor);
    case DataType::kInt64:
      return ScaleTyped<int64_t>(data, count, factor);
    case DataType::kFloat32:
      return ScaleTyped<float>(data, count, factor);
    case DataType::kFloat64:
      return ScaleTyped<double>(data, count, factor);
    case DataType::kFloat16:
      return internal::ScaleFloat16(data, count, static_cast<float>(factor));
    case DataType::kBFloat16:
      return internal::ScaleBFloat16(data, count, static_cast<float>(factor));
    case DataType::kBool:
      return ScaleBool(data, count, factor);
  }
}

}  // namespace hvd::collectives
