// Fuzzes the C ABI's argument check of every tensor a caller hands hvd
// (ViewOf, core/dlpack_tensor.h) with DLPack descriptors built from the
// input: dtype, device, dimensions, shape, strides, offset and a data
// pointer that is NULL or points at a small buffer. ViewOf must refuse what
// is wrong without reading the data, and what it accepts must be
// consistent: its byte count is the product of the shape and the element
// size.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dlpack_tensor.h"
#include "tools/fuzz/input_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hvd::fuzz::InputReader in(data, size);
  DLTensor t{};
  char buffer[64];
  const uint8_t flags = in.Take<uint8_t>();
  t.data = (flags & 1) ? buffer : nullptr;
  t.device.device_type = static_cast<DLDeviceType>(in.Take<uint8_t>() % 20);
  t.device.device_id = in.Take<int8_t>();
  t.dtype.code = in.Take<uint8_t>();
  t.dtype.bits = in.Take<uint8_t>();
  t.dtype.lanes = in.Take<uint16_t>();
  const int8_t ndim = in.Take<int8_t>();  // negative and > 64 included
  t.ndim = ndim;
  const int entries = ndim > 0 ? ndim : 0;
  std::vector<int64_t> shape(entries), strides(entries);
  for (int i = 0; i < entries; ++i) {
    shape[i] = (flags & 2) ? in.Take<int64_t>() : in.Take<uint8_t>();
  }
  for (int i = 0; i < entries; ++i) strides[i] = in.Take<int64_t>();
  t.shape = (flags & 4) || entries == 0 ? shape.data() : nullptr;
  t.strides = (flags & 8) ? strides.data() : nullptr;
  t.byte_offset = in.Take<uint8_t>();
  const int32_t dtype_override = in.Take<int8_t>();
  auto view = hvd::ViewOf(&t, dtype_override);
  if (!view.ok()) return 0;
  size_t bytes = hvd::DataTypeSize(view->dtype);
  for (int64_t d : view->shape) bytes *= static_cast<size_t>(d);
  if (bytes != view->bytes) __builtin_trap();
  return 0;
}
