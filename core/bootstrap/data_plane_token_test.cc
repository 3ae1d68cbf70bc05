#include "core/bootstrap/data_plane_token.h"

#include "gtest/gtest.h"

namespace hvd::bootstrap {
namespace {

TEST(DataPlaneToken, IsAFixedKeyedDigestThatHidesTheJobToken) {
  const std::string a = DataPlaneToken("job-token-a");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a, DataPlaneToken("job-token-a")) << "every rank derives the same";
  EXPECT_NE(a, DataPlaneToken("job-token-b")) << "each job its own";
  EXPECT_EQ(a.find("job-token-a"), std::string::npos);
  // The construction, checked against the openssl tool:
  //   echo -n "hvd data-plane hello 1" | openssl dgst -sha256 -hmac job-token-a
  EXPECT_EQ(a,
            "b059080f5a1a2c35f27c9ec34f27ab8a85cbb79577527d245f780e63203b88ee");
  EXPECT_EQ(DataPlaneToken(""), "");
}

}  // namespace
}  // namespace hvd::bootstrap
