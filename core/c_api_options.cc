// hvd_options at the C ABI: its defaults, the check of the caller's
// struct_size, and the layout bindings compare their copy of it with.
#include <cstddef>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/api_state.h"
#include "core/c_api.h"

namespace hvd::api {
namespace {

struct Field {
  const char* name;
  size_t offset;
  size_t size;
  size_t align;
};

#define HVD_OPTIONS_FIELD(f)                                  \
  Field {                                                     \
    #f, offsetof(hvd_options, f), sizeof(hvd_options::f),     \
        alignof(decltype(hvd_options::f))                     \
  }

// Every field of hvd_options, in order.
constexpr Field kFields[] = {
    HVD_OPTIONS_FIELD(struct_size),      HVD_OPTIONS_FIELD(name),
    HVD_OPTIONS_FIELD(op),               HVD_OPTIONS_FIELD(prescale_factor),
    HVD_OPTIONS_FIELD(postscale_factor), HVD_OPTIONS_FIELD(process_set_id),
    HVD_OPTIONS_FIELD(root_rank),        HVD_OPTIONS_FIELD(splits),
    HVD_OPTIONS_FIELD(num_splits),       HVD_OPTIONS_FIELD(stream),
    HVD_OPTIONS_FIELD(dtype),
};

#undef HVD_OPTIONS_FIELD

constexpr size_t AlignUp(size_t n, size_t align) {
  return (n + align - 1) / align * align;
}

// True when kFields covers the struct: each field starts where the one
// before ended (up to its alignment) and the last ends in the tail padding.
// A field added to hvd_options but not to kFields breaks this, unless it
// fits in padding.
constexpr bool CoversTheStruct() {
  size_t end = 0;
  for (const Field& f : kFields) {
    if (f.offset != AlignUp(end, f.align)) return false;
    end = f.offset + f.size;
  }
  return AlignUp(end, alignof(hvd_options)) == sizeof(hvd_options);
}
static_assert(CoversTheStruct(),
              "kFields must list every field of hvd_options, in order");

std::string LayoutText() {
  std::string text = absl::StrCat(sizeof(hvd_options));
  for (const Field& f : kFields) {
    absl::StrAppend(&text, ";", f.name, " ", f.offset, " ", f.size);
  }
  return text;
}

}  // namespace

absl::StatusOr<hvd_options> ReadOptions(const hvd_options* options) {
  if (options == nullptr) return hvd_default_options();
  // Only the first field is read before the size is known to be ours.
  if (options->struct_size != sizeof(hvd_options)) {
    const absl::Status refused = absl::InvalidArgumentError(absl::StrCat(
        "hvd_options.struct_size is ", options->struct_size,
        " but this libhvd.so's hvd_options has ", sizeof(hvd_options),
        " bytes: the caller was built against another version of "
        "core/c_api.h, or did not start from hvd_default_options()"));
    SetLastError(refused);
    return refused;
  }
  return *options;
}

}  // namespace hvd::api

extern "C" {

hvd_options hvd_default_options(void) {
  hvd_options options;
  std::memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.op = HVD_OP_SUM;
  options.prescale_factor = 1.0;
  options.postscale_factor = 1.0;
  options.dtype = -1;
  return options;
}

const char* hvd_options_layout(void) {
  static const std::string* text = new std::string(hvd::api::LayoutText());
  return text->c_str();
}

}  // extern "C"
