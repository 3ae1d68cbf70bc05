#include "tools/bench/element_type.h"

#include "core/common/half.h"
#include "dlpack/dlpack.h"

namespace hvd::bench {

bool FindType(const std::string& name, Type* t) {
  static const Type kTypes[] = {
      {"float32", kDLFloat, 32}, {"float64", kDLFloat, 64},
      {"float16", kDLFloat, 16}, {"bfloat16", kDLBfloat, 16},
      {"int32", kDLInt, 32},     {"int64", kDLInt, 64},
      {"uint8", kDLUInt, 8},
  };
  for (const Type& k : kTypes) {
    if (name == k.name) {
      *t = k;
      return true;
    }
  }
  return false;
}

void Put(const Type& t, void* base, size_t i, double v) {
  char* p = static_cast<char*>(base);
  if (t.code == kDLFloat && t.bits == 32) {
    reinterpret_cast<float*>(p)[i] = static_cast<float>(v);
  } else if (t.code == kDLFloat && t.bits == 64) {
    reinterpret_cast<double*>(p)[i] = v;
  } else if (t.code == kDLFloat && t.bits == 16) {
    reinterpret_cast<uint16_t*>(p)[i] = FloatToHalf(static_cast<float>(v));
  } else if (t.code == kDLBfloat) {
    reinterpret_cast<uint16_t*>(p)[i] = FloatToBFloat16(static_cast<float>(v));
  } else if (t.code == kDLInt && t.bits == 32) {
    reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
  } else if (t.code == kDLInt && t.bits == 64) {
    reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
  } else {
    reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
  }
}

double Get(const Type& t, const void* base, size_t i) {
  const char* p = static_cast<const char*>(base);
  if (t.code == kDLFloat && t.bits == 32) {
    return reinterpret_cast<const float*>(p)[i];
  } else if (t.code == kDLFloat && t.bits == 64) {
    return reinterpret_cast<const double*>(p)[i];
  } else if (t.code == kDLFloat && t.bits == 16) {
    return HalfToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
  } else if (t.code == kDLBfloat) {
    return BFloat16ToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
  } else if (t.code == kDLInt && t.bits == 32) {
    return reinterpret_cast<const int32_t*>(p)[i];
  } else if (t.code == kDLInt && t.bits == 64) {
    return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
  }
  return reinterpret_cast<const uint8_t*>(p)[i];
}

}  // namespace hvd::bench
