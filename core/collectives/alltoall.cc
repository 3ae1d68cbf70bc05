// Alltoall with explicit byte counts: every receive is posted before any
// send, so no member can block another however the transport buffers; sends
// go out in a rotated order (member i first to i+1) to spread the load.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/collectives/collectives.h"
#include "core/collectives/internal.h"

namespace hvd::collectives {
namespace {

using internal::RequestPtr;
using internal::Span;

absl::Status CheckAlltoallSizes(const Group& group,
                                const std::vector<size_t>& send_bytes,
                                const std::vector<size_t>& recv_bytes) {
  const size_t n = group.size();
  if (send_bytes.size() != n || recv_bytes.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Alltoall: ", send_bytes.size(), " send and ", recv_bytes.size(),
        " receive sizes given for a group of ", n));
  }
  if (send_bytes[group.index] != recv_bytes[group.index]) {
    return absl::InvalidArgumentError(
        absl::StrCat("Alltoall: member ", group.index, " sends itself ",
                     send_bytes[group.index], " bytes but expects ",
                     recv_bytes[group.index]));
  }
  return absl::OkStatus();
}

absl::Status Exchange(transport::Context& context, const Group& group,
                      const char* input, const std::vector<Span>& sends,
                      char* output, const std::vector<Span>& recvs,
                      const CollectiveOptions& options) {
  const int n = group.size();
  const int me = group.index;
  std::vector<RequestPtr> requests;
  internal::PostRecvsFromOthers(context, group, output, recvs, &requests);
  for (int k = 1; k < n; ++k) {
    const int j = internal::Mod(me + k, n);
    if (sends[j].bytes == 0) continue;
    requests.push_back(
        context.Send(group.ranks[j], input + sends[j].offset, sends[j].bytes));
  }
  return internal::WaitAll(requests, internal::LimitsOf(options));
}

}  // namespace

absl::Status Alltoall(transport::Context& context, const Group& group,
                      const void* input, const std::vector<size_t>& send_bytes,
                      void* output, const std::vector<size_t>& recv_bytes,
                      const CollectiveOptions& options) {
  absl::Status status = internal::CheckGroup(context, group, "Alltoall");
  if (status.ok()) status = CheckAlltoallSizes(group, send_bytes, recv_bytes);
  if (!status.ok()) return status;
  const std::vector<Span> sends = internal::Layout(send_bytes);
  const std::vector<Span> recvs = internal::Layout(recv_bytes);
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  const int me = group.index;
  if (sends[me].bytes > 0) {
    std::memmove(out + recvs[me].offset, in + sends[me].offset,
                 sends[me].bytes);
  }
  status = Exchange(context, group, in, sends, out, recvs, options);
  return internal::Annotate(status, "Alltoall", context, group);
}

}  // namespace hvd::collectives
