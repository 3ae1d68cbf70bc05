#include "core/runtime/validation.h"

#include <algorithm>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/types.h"

namespace hvd::runtime {
namespace {

std::string ShapeText(const Request& r, int from_dim) {
  std::vector<int64_t> dims(
      r.shape().begin() + std::min(from_dim, r.shape_size()), r.shape().end());
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// An error listing every rank's value when `field` differs between ranks;
// empty when all agree.
std::string Mismatch(const std::map<int, Request>& requests,
                     absl::string_view what,
                     const std::function<std::string(const Request&)>& field) {
  const std::string first = field(requests.begin()->second);
  bool differs = false;
  for (const auto& [rank, r] : requests) differs |= field(r) != first;
  if (!differs) return "";
  const Request& any = requests.begin()->second;
  std::string text =
      absl::StrCat("Mismatched ", what, " for ", OpTypeName(any.type()),
                   " of tensor '", any.name(), "': ");
  std::vector<std::string> parts;
  for (const auto& [rank, r] : requests) {
    parts.push_back(absl::StrCat("rank ", rank, " has ", field(r)));
  }
  return absl::StrCat(text, absl::StrJoin(parts, ", "));
}

// Whether every request agrees with the first in every field the checks
// below compare (and a few they may not): the common case, decided without
// formatting a field as text.
bool AllAgree(const std::map<int, Request>& requests,
              bool first_dim_may_differ) {
  const Request& a = requests.begin()->second;
  const int from = first_dim_may_differ ? 1 : 0;
  for (const auto& [rank, b] : requests) {
    if (b.type() != a.type() || b.dtype() != a.dtype() ||
        b.device() != a.device() || b.op() != a.op() ||
        b.prescale() != a.prescale() || b.postscale() != a.postscale() ||
        b.root() != a.root() || b.shape_size() != a.shape_size() ||
        !std::equal(a.set_ranks().begin(), a.set_ranks().end(),
                    b.set_ranks().begin(), b.set_ranks().end()) ||
        !std::equal(a.shape().begin() + std::min(from, a.shape_size()),
                    a.shape().end(),
                    b.shape().begin() + std::min(from, b.shape_size()))) {
      return false;
    }
  }
  return true;
}

// A field every rank's request must agree on: its name in the error and how
// to print it.
using FieldCheck =
    std::pair<const char*, std::function<std::string(const Request&)>>;

std::vector<FieldCheck> CommonChecks(bool first_dim_may_differ) {
  std::vector<FieldCheck> checks = {
      {"operations",
       [](const Request& r) { return std::string(OpTypeName(r.type())); }},
      {"data types",
       [](const Request& r) {
         return std::string(DataTypeName(static_cast<DataType>(r.dtype())));
       }},
      {"devices",
       [](const Request& r) {
         return std::string(
             DeviceTypeName(static_cast<DeviceType>(r.device())));
       }},
      {first_dim_may_differ ? "shapes (beyond the first dimension)" : "shapes",
       [first_dim_may_differ](const Request& r) {
         return ShapeText(r, first_dim_may_differ ? 1 : 0);
       }},
  };
  if (first_dim_may_differ) {
    checks.push_back({"number of dimensions", [](const Request& r) {
                        return absl::StrCat(r.shape_size());
                      }});
  }
  return checks;
}

// The fields only some operations carry.
void AddOperationChecks(OpType type, std::vector<FieldCheck>& checks) {
  if (type == ALLREDUCE || type == REDUCESCATTER) {
    checks.push_back({"reduction ops", [](const Request& r) {
                        return std::string(
                            ReduceOpName(static_cast<ReduceOp>(r.op())));
                      }});
    checks.push_back({"prescale factors", [](const Request& r) {
                        return absl::StrCat(r.prescale());
                      }});
    checks.push_back({"postscale factors", [](const Request& r) {
                        return absl::StrCat(r.postscale());
                      }});
  }
  if (type == BROADCAST) {
    checks.push_back({"root ranks",
                      [](const Request& r) { return absl::StrCat(r.root()); }});
  }
  if (type == ADD_PROCESS_SET) {
    checks.push_back({"process set ranks", [](const Request& r) {
                        return absl::StrCat(
                            "[", absl::StrJoin(r.set_ranks(), ", "), "]");
                      }});
  }
  if (type == REMOVE_PROCESS_SET) {
    checks.push_back({"process set ids",
                      [](const Request& r) { return absl::StrCat(r.root()); }});
  }
}

std::string FirstMismatch(const std::map<int, Request>& requests) {
  const OpType type = requests.begin()->second.type();
  const bool first_dim_may_differ = type == ALLGATHER || type == ALLTOALL;
  if (AllAgree(requests, first_dim_may_differ)) return "";
  std::vector<FieldCheck> checks = CommonChecks(first_dim_may_differ);
  AddOperationChecks(type, checks);
  for (const auto& [what, field] : checks) {
    std::string error = Mismatch(requests, what, field);
    if (!error.empty()) return error;
  }
  return "";
}

int64_t RowElements(const Request& r) {
  int64_t n = 1;
  for (int i = 1; i < r.shape_size(); ++i) n *= r.shape(i);
  return n;
}

// The sizes of an op whose one request gives them (allreduce, broadcast).
void FillOwnSizes(const Request& first, Response& response) {
  response.add_sizes(NumElements(first));
  response.add_ndims(first.shape_size());
  for (int64_t d : first.shape()) response.add_dims(d);
}

void FillSizes(const std::map<int, Request>& requests,
               const std::vector<int>& members, Response& response) {
  const Request& first = requests.begin()->second;
  switch (first.type()) {
    case ALLREDUCE:
    case BROADCAST:
      FillOwnSizes(first, response);
      break;
    case REDUCESCATTER:
      response.add_sizes(first.shape_size() > 0 ? first.shape(0) : 1);
      response.add_row_elems(RowElements(first));
      break;
    case ALLGATHER:
      for (int m : members) {
        const Request& r = requests.at(m);
        response.add_sizes(r.shape_size() > 0 ? r.shape(0) : 1);
      }
      response.add_row_elems(RowElements(first));
      break;
    case ALLTOALL:
      for (int m : members) {
        for (int64_t s : requests.at(m).splits()) response.add_sizes(s);
      }
      response.add_row_elems(RowElements(first));
      break;
    default:
      break;
  }
}

}  // namespace

const char* OpTypeName(OpType type) {
  switch (type) {
    case ALLREDUCE:
      return "allreduce";
    case ALLGATHER:
      return "allgather";
    case BROADCAST:
      return "broadcast";
    case ALLTOALL:
      return "alltoall";
    case REDUCESCATTER:
      return "reducescatter";
    case BARRIER:
      return "barrier";
    case JOIN:
      return "join";
    case ADD_PROCESS_SET:
      return "add_process_set";
    case REMOVE_PROCESS_SET:
      return "remove_process_set";
    default:
      return "unknown-op";
  }
}

int64_t NumElements(const Request& request) {
  int64_t n = 1;
  for (int64_t d : request.shape()) n *= d;
  return n;
}

namespace {

// The response's op and tensor, as an error response carries them.
Response Named(const Request& first) {
  Response response;
  response.set_type(first.type());
  response.add_names(first.name());
  response.set_process_set(first.process_set());
  return response;
}

// What every rank executes, from the request that stands for all (sizes
// apart).
void FillAgreed(const Request& first, const std::vector<int>& joined,
                Response& response) {
  response.set_dtype(first.dtype());
  response.set_device(first.device());
  response.set_op(first.op());
  response.set_prescale(first.prescale());
  response.set_postscale(first.postscale());
  response.set_root(first.root());
  for (int r : joined) response.add_joined(r);
  for (int r : first.set_ranks()) response.add_set_ranks(r);
}

}  // namespace

Response BuildResponse(const std::map<int, Request>& requests,
                       const std::vector<int>& members,
                       const std::vector<int>& joined) {
  const Request& first = requests.begin()->second;
  Response response = Named(first);
  const std::string error = FirstMismatch(requests);
  if (!error.empty()) {
    response.set_error(error);
    return response;
  }
  if (first.type() != ALLREDUCE && !joined.empty()) {
    response.set_error(
        absl::StrCat(OpTypeName(first.type()), " of tensor '", first.name(),
                     "' cannot run after rank(s) ", absl::StrJoin(joined, ", "),
                     " joined: only allreduce continues with joined ranks"));
    return response;
  }
  FillAgreed(first, joined, response);
  FillSizes(requests, members, response);
  return response;
}

Response AgreedAllreduceResponse(const Request& request,
                                 const std::vector<int>& joined) {
  Response response = Named(request);
  FillAgreed(request, joined, response);
  FillOwnSizes(request, response);
  return response;
}

}  // namespace hvd::runtime
