// Test support: inputs for every dtype and op whose reductions are exact in
// that dtype (small integers; {1, 2} or {-1, 1, 2} for Product), and the
// reference results, with integer overflow wrapping as the kernels do.
#ifndef HVD_CORE_COLLECTIVES_TEST_VALUES_H_
#define HVD_CORE_COLLECTIVES_TEST_VALUES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "core/common/types.h"

namespace hvd::collectives {

inline constexpr DataType kAllDataTypes[] = {
    DataType::kUint8,   DataType::kInt8,     DataType::kUint16,
    DataType::kInt16,   DataType::kInt32,    DataType::kInt64,
    DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
    DataType::kFloat64, DataType::kBool};

inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kMin,
                                       ReduceOp::kMax, ReduceOp::kProduct};

// `count` elements of `dtype`: what `rank` contributes to a reduction with
// `op`. Exact for up to 8 ranks.
std::vector<char> MakeInput(DataType dtype, ReduceOp op, int rank,
                            size_t count);

// The reduction with `op` of MakeInput(dtype, op, r, count) over `ranks`.
std::vector<char> Expected(DataType dtype, ReduceOp op,
                           const std::vector<int>& ranks, size_t count);

// "" if equal; else the first differing element index and both byte
// patterns, prefixed by `what`.
std::string Mismatch(const std::string& what, DataType dtype, const char* got,
                     const char* want, size_t count);

// `bytes` bytes that identify (tag, offset): for data-movement tests.
std::vector<char> Pattern(int tag, size_t bytes);

}  // namespace hvd::collectives

#endif  // HVD_CORE_COLLECTIVES_TEST_VALUES_H_
