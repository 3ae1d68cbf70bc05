// hvd_options at the C ABI: a struct_size this library does not know is
// refused by every call taking options, before anything else is looked at
// (hvd is not even initialised here), with the same text on the handle and
// as the thread's last error; hvd_options_layout() describes the struct the
// library was built with (python/tests/options_layout_test.py compares the
// Python copy with it).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/c_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// The error of `handle`, which must have failed; releases it.
std::string ErrorOf(hvd_handle handle) {
  EXPECT_EQ(hvd_wait(handle, 30.0), HVD_ERROR);
  std::string error = hvd_handle_error(handle);
  hvd_release(handle);
  return error;
}

class OptionsTest : public ::testing::Test {
 protected:
  OptionsTest() {
    t_.data = &value_;
    t_.device = {kDLCPU, 0};
    t_.ndim = 1;
    t_.dtype = {kDLFloat, 32, 1};
    t_.shape = shape_;
  }

  // Every call of the C ABI that takes options.
  std::vector<std::function<hvd_handle(const hvd_options*)>> Calls() {
    DLTensor* in = &t_;
    return {
        [=](const hvd_options* o) { return hvd_allreduce_async(in, nullptr, o); },
        [=](const hvd_options* o) {
          DLTensor* ins[] = {in};
          return hvd_grouped_allreduce_async(1, ins, nullptr, o);
        },
        [=](const hvd_options* o) { return hvd_allgather_async(in, o); },
        [=](const hvd_options* o) {
          DLTensor* ins[] = {in};
          return hvd_grouped_allgather_async(1, ins, o);
        },
        [=](const hvd_options* o) { return hvd_broadcast_async(in, nullptr, o); },
        [=](const hvd_options* o) { return hvd_alltoall_async(in, o); },
        [=](const hvd_options* o) { return hvd_reducescatter_async(in, o); },
        [=](const hvd_options* o) {
          DLTensor* ins[] = {in};
          return hvd_grouped_reducescatter_async(1, ins, o);
        },
        [](const hvd_options* o) { return hvd_barrier_async(o); },
        [](const hvd_options* o) { return hvd_join_async(o); },
    };
  }

  float value_ = 1;
  int64_t shape_[1] = {1};
  DLTensor t_{};
};

TEST_F(OptionsTest, DefaultsCarryTheLibrarysStructSize) {
  EXPECT_EQ(hvd_default_options().struct_size, sizeof(hvd_options));
}

TEST_F(OptionsTest, SmallerStructSizeRefusedByEveryCall) {
  hvd_options o = hvd_default_options();
  o.struct_size = sizeof(hvd_options) - 8;  // a caller missing a field
  for (auto& call : Calls()) {
    const std::string error = ErrorOf(call(&o));
    EXPECT_THAT(error, HasSubstr(absl::StrCat(
                           "hvd_options.struct_size is ", o.struct_size,
                           " but this libhvd.so's hvd_options has ",
                           sizeof(hvd_options), " bytes")));
    EXPECT_EQ(std::string(hvd_last_error()), error);
  }
}

TEST_F(OptionsTest, LargerStructSizeRefused) {
  hvd_options o = hvd_default_options();
  o.struct_size = sizeof(hvd_options) + 8;  // a caller from a newer header
  EXPECT_THAT(ErrorOf(hvd_allreduce_async(&t_, nullptr, &o)),
              HasSubstr("built against another version of core/c_api.h"));
}

TEST_F(OptionsTest, ZeroInitialisedStructRefused) {
  hvd_options o{};
  EXPECT_THAT(ErrorOf(hvd_barrier_async(&o)),
              HasSubstr("hvd_options.struct_size is 0"));
}

TEST_F(OptionsTest, DefaultsAndNullPassTheCheck) {
  hvd_options o = hvd_default_options();
  for (const hvd_options* options : {&o, static_cast<hvd_options*>(nullptr)}) {
    for (auto& call : Calls()) {
      EXPECT_THAT(ErrorOf(call(options)), HasSubstr("hvd is not initialized"));
    }
  }
}

TEST_F(OptionsTest, LayoutStartsWithTheSizeAndStructSize) {
  EXPECT_THAT(hvd_options_layout(),
              StartsWith(absl::StrCat(sizeof(hvd_options), ";struct_size 0 ",
                                      sizeof(size_t), ";name ")));
}

TEST_F(OptionsTest, LayoutEndsWithDtype) {
  const std::string layout = hvd_options_layout();
  const std::string last = absl::StrCat(";dtype ", offsetof(hvd_options, dtype),
                                        " ", sizeof(int32_t));
  ASSERT_GE(layout.size(), last.size());
  EXPECT_EQ(layout.substr(layout.size() - last.size()), last);
}

}  // namespace
