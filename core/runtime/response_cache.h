// Response cache: the allreduces a training step repeats, remembered so that
// later steps are negotiated by a bit per tensor instead of full requests.
//
// Every rank holds an identical cache: entries are inserted, touched and
// evicted only while executing the coordinator's responses, which every rank
// executes in the same order. So slot numbers mean the same on every rank and
// a bit vector of ready slots is enough to agree.
#ifndef HVD_CORE_RUNTIME_RESPONSE_CACHE_H_
#define HVD_CORE_RUNTIME_RESPONSE_CACHE_H_

#include <cstdint>
#include <list>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime/tensor_key.h"
#include "proto/negotiation.pb.h"

namespace hvd::runtime {

// Not thread-safe: used by the background thread only.
class ResponseCache {
 public:
  explicit ResponseCache(int capacity);
  ResponseCache(const ResponseCache&) = delete;
  ResponseCache& operator=(const ResponseCache&) = delete;

  int capacity() const { return capacity_; }
  // Slot whose cached request equals `request` in every negotiated field, or
  // -1 (absent, or present with other parameters).
  int Lookup(const Request& request) const;
  // Cached request in `slot`, nullptr if the slot is free.
  const Request* At(int slot) const;
  // Inserts or refreshes (most recently used); evicts the least recently used
  // entry when full. No-op when capacity is 0.
  void Put(const Request& request);
  // Put of the request that tensor `index` of an executed allreduce
  // `response` stands for (its dims start at `first_dim` of the
  // response's).
  void PutFromResponse(const Response& response, int index, int first_dim);
  void Erase(int process_set, const std::string& name);
  // Erases every entry of `process_set` (it was removed: its names will not
  // come again), freeing their slots.
  void EraseProcessSet(int process_set);
  // Changes whenever a slot's request does (an entry inserted, replaced,
  // evicted or erased), not when an entry is only refreshed: what was
  // derived from the slots holds while it stays the same.
  uint64_t generation() const { return generation_; }

 private:
  struct Entry {
    Request request;
    int slot;
    std::list<TensorKey>::iterator lru;
  };

  int capacity_;
  StableTensorKeyMap<Entry> entries_;
  std::vector<const Entry*> slots_;  // slot -> entry (nullptr: free)
  std::list<TensorKey> lru_;         // front: most recently used
  uint64_t generation_ = 0;
};

// Helpers for the bit vector carried in RequestList.cache_bits.
void SetBit(std::string& bits, int slot);
bool GetBit(const std::string& bits, int slot);
// The slots set in `bits`, ascending.
std::vector<int> SetSlots(const std::string& bits);

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_RESPONSE_CACHE_H_
