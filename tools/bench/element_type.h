// The element types the benchmarks sweep, by name, and reading and writing
// one element of a buffer of that type as a double.
#ifndef HVD_TOOLS_BENCH_ELEMENT_TYPE_H_
#define HVD_TOOLS_BENCH_ELEMENT_TYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace hvd::bench {

struct Type {
  const char* name;  // float32 float64 float16 bfloat16 int32 int64 uint8
  uint8_t code;      // DLDataTypeCode
  uint8_t bits;
};

// The type called `name`; false for an unknown name.
bool FindType(const std::string& name, Type* t);

// Element i of `base` as type `t`: written from, or read as, a double
// (integers truncate; float16 and bfloat16 round).
void Put(const Type& t, void* base, size_t i, double v);
double Get(const Type& t, const void* base, size_t i);

}  // namespace hvd::bench

#endif  // HVD_TOOLS_BENCH_ELEMENT_TYPE_H_
