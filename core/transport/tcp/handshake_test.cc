#include "core/transport/tcp/handshake.h"

#include "gtest/gtest.h"

namespace hvd::transport::tcp_internal {
namespace {

const unsigned char* Bytes(const std::string& s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

TEST(HelloTest, RoundTrips) {
  const std::string hello = EncodeHello(3, 8, "tok");
  ASSERT_EQ(hello.size(), kHelloFixedBytes + 3);
  auto header = DecodeHelloHeader(Bytes(hello));
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->rank, 3u);
  EXPECT_EQ(header->size, 8u);
  EXPECT_EQ(header->token_bytes, 3u);
  EXPECT_EQ(hello.substr(kHelloFixedBytes), "tok");
}

TEST(HelloTest, RejectsForeignBytes) {
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n";
  EXPECT_EQ(DecodeHelloHeader(Bytes(http)).status(),
            absl::InvalidArgumentError("not an hvd TCP hello (bad magic)"));
}

TEST(HelloTest, RejectsOversizedToken) {
  std::string hello = EncodeHello(1, 2, "");
  hello[16] = 0x01;
  hello[17] = 0x10;  // 4097 bytes
  EXPECT_EQ(DecodeHelloHeader(Bytes(hello)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HelloProofTest, IsBoundToTheSecretThePairAndTheJobSize) {
  const std::string proof = HelloProof("secret", 2, 0, 4);
  EXPECT_EQ(proof.size(), 64u);
  EXPECT_EQ(proof, HelloProof("secret", 2, 0, 4));
  EXPECT_EQ(proof.find("secret"), std::string::npos);
  EXPECT_NE(proof, HelloProof("secret", 2, 1, 4));  // another listener
  EXPECT_NE(proof, HelloProof("secret", 0, 2, 4));  // the other way
  EXPECT_NE(proof, HelloProof("secret", 2, 0, 5));  // another job size
  EXPECT_NE(proof, HelloProof("secreT", 2, 0, 4));  // another job
  EXPECT_EQ(HelloProof("", 2, 0, 4), "");
}

TEST(TokensEqualTest, ComparesContentAndLength) {
  EXPECT_TRUE(TokensEqual("secret", "secret"));
  EXPECT_TRUE(TokensEqual("", ""));
  EXPECT_FALSE(TokensEqual("secret", "secreT"));
  EXPECT_FALSE(TokensEqual("secret", "secret2"));
  EXPECT_FALSE(TokensEqual("secret", "secre"));
  EXPECT_FALSE(TokensEqual("secret", ""));
  EXPECT_FALSE(TokensEqual("", "x"));
}

}  // namespace
}  // namespace hvd::transport::tcp_internal
