#include "core/runtime/response_cache.h"

#include <algorithm>

namespace hvd::runtime {
namespace {

template <typename T>
bool SameRepeated(const google::protobuf::RepeatedField<T>& a,
                  const google::protobuf::RepeatedField<T>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// Every field but rank, compared directly: the reflection-based
// MessageDifferencer on copies cost ~10 us a call, on every pending tensor
// every cycle (response_cache_test checks that the field list is complete).
bool SameParameters(const Request& a, const Request& b) {
  return a.type() == b.type() && a.name() == b.name() &&
         a.dtype() == b.dtype() && SameRepeated(a.shape(), b.shape()) &&
         a.device() == b.device() && a.op() == b.op() &&
         a.prescale() == b.prescale() && a.postscale() == b.postscale() &&
         a.root() == b.root() && a.process_set() == b.process_set() &&
         SameRepeated(a.splits(), b.splits()) && a.group() == b.group() &&
         a.group_size() == b.group_size() &&
         SameRepeated(a.set_ranks(), b.set_ranks());
}

// The request tensor `index` of an allreduce `response` stands for.
Request RequestFrom(const Response& response, int index, int first_dim) {
  Request request;
  request.set_type(ALLREDUCE);
  request.set_name(response.names(index));
  request.set_dtype(response.dtype());
  for (int d = 0; d < response.ndims(index); ++d) {
    request.add_shape(response.dims(first_dim + d));
  }
  request.set_device(response.device());
  request.set_op(response.op());
  request.set_prescale(response.prescale());
  request.set_postscale(response.postscale());
  request.set_process_set(response.process_set());
  return request;
}

// Whether `cached` has the parameters RequestFrom(response, index,
// first_dim) would give it, found without building that request (a step's
// every tensor refreshes its entry: three allocations each).
bool SameAsBuilt(const Request& cached, const Response& response, int index,
                 int first_dim) {
  const int ndims = response.ndims(index);
  if (cached.type() != ALLREDUCE || cached.dtype() != response.dtype() ||
      cached.device() != response.device() || cached.op() != response.op() ||
      cached.prescale() != response.prescale() ||
      cached.postscale() != response.postscale() ||
      cached.process_set() != response.process_set() || cached.root() != 0 ||
      !cached.splits().empty() || !cached.group().empty() ||
      cached.group_size() != 0 || !cached.set_ranks().empty() ||
      cached.shape_size() != ndims) {
    return false;
  }
  for (int d = 0; d < ndims; ++d) {
    if (cached.shape(d) != response.dims(first_dim + d)) return false;
  }
  return true;
}

}  // namespace

ResponseCache::ResponseCache(int capacity)
    : capacity_(capacity), slots_(capacity, nullptr) {}

int ResponseCache::Lookup(const Request& request) const {
  auto it = entries_.find(TensorKeyView(request.process_set(), request.name()));
  if (it == entries_.end()) return -1;
  return SameParameters(it->second.request, request) ? it->second.slot : -1;
}

const Request* ResponseCache::At(int slot) const {
  if (slot < 0 || slot >= capacity_ || slots_[slot] == nullptr) return nullptr;
  return &slots_[slot]->request;
}

void ResponseCache::Put(const Request& request) {
  if (capacity_ == 0) return;
  auto it = entries_.find(TensorKeyView(request.process_set(), request.name()));
  if (it != entries_.end()) {
    // Refreshed every step: copied only when its parameters changed.
    if (!SameParameters(it->second.request, request)) {
      it->second.request = request;
      it->second.request.set_rank(0);
      ++generation_;
    }
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  TensorKey key{request.process_set(), request.name()};
  int slot = -1;
  if (static_cast<int>(entries_.size()) == capacity_) {
    const TensorKey victim = lru_.back();
    slot = entries_.at(victim).slot;
    Erase(victim.first, victim.second);
  } else {
    for (int i = 0; i < capacity_; ++i) {
      if (slots_[i] == nullptr) {
        slot = i;
        break;
      }
    }
  }
  lru_.push_front(key);
  Entry& entry = entries_[key];
  entry.request = request;
  entry.request.set_rank(0);
  entry.slot = slot;
  entry.lru = lru_.begin();
  slots_[slot] = &entry;
  ++generation_;
}

void ResponseCache::PutFromResponse(const Response& response, int index,
                                    int first_dim) {
  if (capacity_ == 0) return;
  auto it = entries_.find(
      TensorKeyView(response.process_set(), response.names(index)));
  if (it != entries_.end() &&
      SameAsBuilt(it->second.request, response, index, first_dim)) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  Put(RequestFrom(response, index, first_dim));
}

void ResponseCache::Erase(int process_set, const std::string& name) {
  auto it = entries_.find(TensorKeyView(process_set, name));
  if (it == entries_.end()) return;
  slots_[it->second.slot] = nullptr;
  lru_.erase(it->second.lru);
  entries_.erase(it);
  ++generation_;
}

void ResponseCache::EraseProcessSet(int process_set) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->first.first != process_set) {
      ++it;
      continue;
    }
    slots_[it->second.slot] = nullptr;
    lru_.erase(it->second.lru);
    entries_.erase(it++);
    ++generation_;
  }
}

void SetBit(std::string& bits, int slot) {
  const size_t byte = static_cast<size_t>(slot) / 8;
  if (bits.size() <= byte) bits.resize(byte + 1, '\0');
  bits[byte] = static_cast<char>(bits[byte] | (1 << (slot % 8)));
}

bool GetBit(const std::string& bits, int slot) {
  const size_t byte = static_cast<size_t>(slot) / 8;
  return byte < bits.size() && (bits[byte] >> (slot % 8)) & 1;
}

std::vector<int> SetSlots(const std::string& bits) {
  std::vector<int> slots;
  for (size_t byte = 0; byte < bits.size(); ++byte) {
    for (int b = 0; b < 8 && bits[byte] != 0; ++b) {
      if ((bits[byte] >> b) & 1)
        slots.push_back(static_cast<int>(byte * 8) + b);
    }
  }
  return slots;
}

}  // namespace hvd::runtime
