#include "core/runtime/response_cache.h"

#include <google/protobuf/util/message_differencer.h>

namespace hvd::runtime {
namespace {

bool SameParameters(const Request& a, const Request& b) {
  Request x = a;
  Request y = b;
  x.set_rank(0);
  y.set_rank(0);
  return google::protobuf::util::MessageDifferencer::Equals(x, y);
}

}  // namespace

ResponseCache::ResponseCache(int capacity)
    : capacity_(capacity), slots_(capacity, nullptr) {}

int ResponseCache::Lookup(const Request& request) const {
  auto it = entries_.find({request.process_set(), request.name()});
  if (it == entries_.end()) return -1;
  return SameParameters(it->second.request, request) ? it->second.slot : -1;
}

const Request* ResponseCache::At(int slot) const {
  if (slot < 0 || slot >= capacity_ || slots_[slot] == nullptr) return nullptr;
  return &slots_[slot]->request;
}

void ResponseCache::Put(const Request& request) {
  if (capacity_ == 0) return;
  Key key{request.process_set(), request.name()};
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    it->second.request = request;
    it->second.request.set_rank(0);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  int slot = -1;
  if (static_cast<int>(entries_.size()) == capacity_) {
    const Key victim = lru_.back();
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
}

void ResponseCache::Erase(int process_set, const std::string& name) {
  auto it = entries_.find({process_set, name});
  if (it == entries_.end()) return;
  slots_[it->second.slot] = nullptr;
  lru_.erase(it->second.lru);
  entries_.erase(it);
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

}  // namespace hvd::runtime
