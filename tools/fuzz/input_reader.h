// Reads a fuzz input front to back as little-endian fields; once the input
// runs out, fields read as zero, so every input means something.
#ifndef HVD_TOOLS_FUZZ_INPUT_READER_H_
#define HVD_TOOLS_FUZZ_INPUT_READER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hvd::fuzz {

class InputReader {
 public:
  InputReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  // The next sizeof(T) bytes as a T (zero-filled past the end).
  template <typename T>
  T Take() {
    T value{};
    const size_t n = std::min(sizeof(T), left());
    std::memcpy(&value, data_ + at_, n);
    at_ += n;
    return value;
  }
  // Copies up to `n` of the next bytes to `out`; leaves the rest of `out`.
  void TakeBytes(void* out, size_t n) {
    n = std::min(n, left());
    std::memcpy(out, data_ + at_, n);
    at_ += n;
  }
  size_t left() const { return size_ - at_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace hvd::fuzz

#endif  // HVD_TOOLS_FUZZ_INPUT_READER_H_
