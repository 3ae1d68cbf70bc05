// Checks that every rank submitted a tensor the same way, and builds the
// response all ranks execute. Pure functions: used by the coordinator.
#ifndef HVD_CORE_RUNTIME_VALIDATION_H_
#define HVD_CORE_RUNTIME_VALIDATION_H_

#include <map>
#include <vector>

#include "proto/negotiation.pb.h"

namespace hvd::runtime {

// `requests`: rank -> its request for one tensor, every non-joined member of
// the process set present. `members`: the set's ranks in set order.
// `joined`: members contributing zeros. Returns the response; on a mismatch,
// a response whose `error` names the tensor and each rank's value.
Response BuildResponse(const std::map<int, Request>& requests,
                       const std::vector<int>& members,
                       const std::vector<int>& joined);

// BuildResponse's response to an allreduce whose request every member
// already agreed on (a cached request stands for all): built from that one
// request, without checking or copying it.
Response AgreedAllreduceResponse(const Request& request,
                                 const std::vector<int>& joined);

// "allreduce" etc.
const char* OpTypeName(OpType type);

// Element count of a request's tensor.
int64_t NumElements(const Request& request);

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_VALIDATION_H_
