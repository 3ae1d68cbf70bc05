// Helpers for hvd_driver: host tensors as DLPack, and checks that print
// "rank R: ..." and count failures.
#ifndef HVD_TESTS_RUNTIME_DRIVER_UTIL_H_
#define HVD_TESTS_RUNTIME_DRIVER_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/c_api.h"

namespace hvd::driver {

// A CPU tensor whose DLTensor views `data`.
template <typename T>
struct Tensor {
  std::vector<T> data;
  std::vector<int64_t> shape;
  DLTensor dl{};

  Tensor(std::vector<int64_t> dims, T fill = T()) : shape(std::move(dims)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    data.assign(n, fill);
    Bind();
  }
  void Bind() {
    dl.data = data.data();
    dl.device = {kDLCPU, 0};
    dl.ndim = static_cast<int>(shape.size());
    dl.dtype = Code();
    dl.shape = shape.data();
    dl.strides = nullptr;
    dl.byte_offset = 0;
  }
  static DLDataType Code();
};

template <> inline DLDataType Tensor<float>::Code() { return {kDLFloat, 32, 1}; }
template <> inline DLDataType Tensor<double>::Code() { return {kDLFloat, 64, 1}; }
template <> inline DLDataType Tensor<int32_t>::Code() { return {kDLInt, 32, 1}; }
template <> inline DLDataType Tensor<int64_t>::Code() { return {kDLInt, 64, 1}; }
template <> inline DLDataType Tensor<uint8_t>::Code() { return {kDLUInt, 8, 1}; }

// Waits for `handle` (60 s at most). Returns "" on success, else the error.
inline std::string Wait(hvd_handle handle) {
  const int rc = hvd_wait(handle, 60.0);
  if (rc == HVD_TIMEOUT) return "timed out after 60 s";
  if (rc == HVD_OK) return "";
  return hvd_handle_error(handle);
}

struct Checker {
  int rank = -1;
  int failures = 0;
  void Fail(const std::string& what) {
    ++failures;
    std::printf("rank %d: FAIL %s\n", rank, what.c_str());
    std::fflush(stdout);
  }
  template <typename T>
  void Equal(const std::string& what, T got, T want) {
    if (!(got == want)) {
      Fail(what + ": got " + std::to_string(got) + " want " +
           std::to_string(want));
    }
  }
  void Ok(const std::string& what, const std::string& error) {
    if (!error.empty()) Fail(what + ": " + error);
  }
};

}  // namespace hvd::driver

#endif  // HVD_TESTS_RUNTIME_DRIVER_UTIL_H_
