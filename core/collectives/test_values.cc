#include "core/collectives/test_values.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/common/half.h"

namespace hvd::collectives {
namespace {

uint64_t Mix(int rank, size_t i) {
  uint64_t h = i * 0x9E3779B97F4A7C15ull +
               static_cast<uint64_t>(rank + 1) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}

bool IsUnsigned(DataType dtype) {
  return dtype == DataType::kUint8 || dtype == DataType::kUint16;
}

int64_t InputValue(DataType dtype, ReduceOp op, int rank, size_t i) {
  const uint64_t h = Mix(rank, i);
  const bool is_and = op == ReduceOp::kProduct || op == ReduceOp::kMin;
  if (dtype == DataType::kBool) return is_and ? h % 8 != 0 : h % 8 == 0;
  if (op == ReduceOp::kProduct) {
    if (IsUnsigned(dtype)) return 1 + static_cast<int64_t>(h % 2);
    static constexpr int64_t kFactors[] = {-1, 1, 2};
    return kFactors[h % 3];
  }
  if (IsUnsigned(dtype)) return static_cast<int64_t>(h % 101);
  // bfloat16 holds integers exactly only up to 256: keep 8-rank sums below.
  if (dtype == DataType::kBFloat16) return static_cast<int64_t>(h % 33) - 16;
  return static_cast<int64_t>(h % 101) - 50;
}

int64_t Combine(ReduceOp op, int64_t a, int64_t b) {
  switch (op) {
    case ReduceOp::kMin:
      return a < b ? a : b;
    case ReduceOp::kMax:
      return a < b ? b : a;
    case ReduceOp::kProduct:
      return a * b;
    default:
      return a + b;
  }
}

template <typename T>
void StoreTyped(const std::vector<int64_t>& values, char* out) {
  for (size_t i = 0; i < values.size(); ++i) {
    T v;
    if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(static_cast<uint64_t>(values[i]));  // Wraps.
    } else {
      v = static_cast<T>(values[i]);
    }
    std::memcpy(out + i * sizeof(T), &v, sizeof(T));
  }
}

template <uint16_t (*kConvert)(float)>
void StoreHalf(const std::vector<int64_t>& values, char* out) {
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t v = kConvert(static_cast<float>(values[i]));
    std::memcpy(out + i * 2, &v, 2);
  }
}

std::vector<char> Store(DataType dtype, const std::vector<int64_t>& values) {
  std::vector<char> out(values.size() * DataTypeSize(dtype));
  char* p = out.data();
  switch (dtype) {
    case DataType::kUint8:
      StoreTyped<uint8_t>(values, p);
      break;
    case DataType::kInt8:
      StoreTyped<int8_t>(values, p);
      break;
    case DataType::kUint16:
      StoreTyped<uint16_t>(values, p);
      break;
    case DataType::kInt16:
      StoreTyped<int16_t>(values, p);
      break;
    case DataType::kInt32:
      StoreTyped<int32_t>(values, p);
      break;
    case DataType::kInt64:
      StoreTyped<int64_t>(values, p);
      break;
    case DataType::kFloat32:
      StoreTyped<float>(values, p);
      break;
    case DataType::kFloat64:
      StoreTyped<double>(values, p);
      break;
    case DataType::kFloat16:
      StoreHalf<FloatToHalf>(values, p);
      break;
    case DataType::kBFloat16:
      StoreHalf<FloatToBFloat16>(values, p);
      break;
    case DataType::kBool:
      for (size_t i = 0; i < values.size(); ++i) p[i] = values[i] != 0;
      break;
  }
  return out;
}

}  // namespace

std::vector<char> MakeInput(DataType dtype, ReduceOp op, int rank,
                            size_t count) {
  std::vector<int64_t> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = InputValue(dtype, op, rank, i);
  return Store(dtype, values);
}

std::vector<char> Expected(DataType dtype, ReduceOp op,
                           const std::vector<int>& ranks, size_t count) {
  std::vector<int64_t> values(count);
  for (size_t i = 0; i < count; ++i) {
    values[i] = InputValue(dtype, op, ranks[0], i);
  }
  for (size_t k = 1; k < ranks.size(); ++k) {
    for (size_t i = 0; i < count; ++i) {
      values[i] = Combine(op, values[i], InputValue(dtype, op, ranks[k], i));
    }
  }
  return Store(dtype, values);
}

std::string Mismatch(const std::string& what, DataType dtype, const char* got,
                     const char* want, size_t count) {
  const size_t size = DataTypeSize(dtype);
  if (count == 0 || std::memcmp(got, want, count * size) == 0) return "";
  size_t i = 0;
  while (std::memcmp(got + i * size, want + i * size, size) == 0) ++i;
  auto hex = [&](const char* p) {
    std::string s;
    for (size_t b = size; b-- > 0;) {
      absl::StrAppend(
          &s, absl::Hex(static_cast<unsigned char>(p[b]), absl::kZeroPad2));
    }
    return s;
  };
  return absl::StrCat(what, " ", DataTypeName(dtype), ": element ", i, " of ",
                      count, " is 0x", hex(got + i * size), ", want 0x",
                      hex(want + i * size));
}

std::vector<char> Pattern(int tag, size_t bytes) {
  std::vector<char> out(bytes);
  for (size_t i = 0; i < bytes; ++i) {
    out[i] = static_cast<char>(Mix(tag, i) >> 56);
  }
  return out;
}

}  // namespace hvd::collectives
