// The secret ranks present to each other in the data plane's hello (TCP,
// RDMA), derived from the job token so that the hello, which is not
// encrypted, never carries the job token itself: an observer of the data
// plane learns nothing that opens the rendezvous (TLS keeps the job token
// off the wire there). Another job's hellos carry another job's secret, so
// they are refused; the comparison is constant-time (TokensEqual).
#ifndef HVD_CORE_BOOTSTRAP_DATA_PLANE_TOKEN_H_
#define HVD_CORE_BOOTSTRAP_DATA_PLANE_TOKEN_H_

#include <string>

#include "absl/strings/string_view.h"

namespace hvd::bootstrap {

// Hex of HMAC-SHA256(job_token, "hvd data-plane hello 1"): 64 characters;
// the empty string for an empty job token (a job of one needs none).
std::string DataPlaneToken(absl::string_view job_token);

}  // namespace hvd::bootstrap

#endif  // HVD_CORE_BOOTSTRAP_DATA_PLANE_TOKEN_H_
