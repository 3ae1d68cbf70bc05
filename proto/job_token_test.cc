#include "proto/job_token.h"

#include <string>

#include "gtest/gtest.h"

namespace hvd {
namespace rendezvous {
namespace {

TEST(JobTokenMatches, SameTokenMatches) {
  EXPECT_TRUE(JobTokenMatches("3f9a0c", "3f9a0c"));
}

TEST(JobTokenMatches, DifferentLastByteDoesNotMatch) {
  EXPECT_FALSE(JobTokenMatches("3f9a0d", "3f9a0c"));
}

TEST(JobTokenMatches, PrefixDoesNotMatch) {
  EXPECT_FALSE(JobTokenMatches("3f9a", "3f9a0c"));
}

TEST(JobTokenMatches, LongerTokenDoesNotMatch) {
  EXPECT_FALSE(JobTokenMatches("3f9a0c00", "3f9a0c"));
}

TEST(JobTokenMatches, EmptyPresentedDoesNotMatch) {
  EXPECT_FALSE(JobTokenMatches("", "3f9a0c"));
}

TEST(JobTokenMatches, TrailingNulDoesNotMatch) {
  EXPECT_FALSE(JobTokenMatches(std::string("3f9a0c\0", 7), "3f9a0c"));
}

TEST(ValidateJobToken, HexTokenIsValid) {
  EXPECT_TRUE(ValidateJobToken("0123456789abcdef").ok());
}

TEST(ValidateJobToken, EmptyIsRejected) {
  absl::Status s = ValidateJobToken("");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "job token is empty");
}

TEST(ValidateJobToken, ControlByteIsRejectedWithoutQuotingTheToken) {
  absl::Status s = ValidateJobToken("secret\nvalue");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("offset 6"), absl::string_view::npos) << s;
  EXPECT_EQ(s.message().find("secret"), absl::string_view::npos) << s;
}

TEST(ValidateJobToken, SpaceIsRejected) {
  EXPECT_EQ(ValidateJobToken("a b").code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidateJobToken, OverlongIsRejected) {
  EXPECT_EQ(ValidateJobToken(std::string(1025, 'a')).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rendezvous
}  // namespace hvd
