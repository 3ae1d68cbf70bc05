#include "core/runtime/process_sets.h"

#include <algorithm>
#include <numeric>

namespace hvd::runtime {

ProcessSetTable::ProcessSetTable(int world_size) : world_size_(world_size) {
  std::vector<int> all(world_size);
  std::iota(all.begin(), all.end(), 0);
  sets_[0] = std::make_shared<const std::vector<int>>(std::move(all));
}

ProcessSetTable::Members ProcessSetTable::Ranks(int id) const {
  absl::MutexLock lock(&mu_);
  auto it = sets_.find(id);
  return it == sets_.end() ? nullptr : it->second;
}

int PositionIn(const std::vector<int>& ranks, int rank) {
  // Sets are kept ascending: a binary search, where every submission of a
  // job of thousands of ranks would otherwise scan its set.
  auto pos = std::lower_bound(ranks.begin(), ranks.end(), rank);
  return pos == ranks.end() || *pos != rank
             ? -1
             : static_cast<int>(pos - ranks.begin());
}

int ProcessSetTable::IndexOf(int id, int rank) const {
  const Members members = Ranks(id);
  return members ? PositionIn(*members, rank) : -1;
}

std::vector<int> ProcessSetTable::Ids() const {
  absl::MutexLock lock(&mu_);
  std::vector<int> ids;
  for (const auto& [id, ranks] : sets_) ids.push_back(id);
  return ids;
}

int ProcessSetTable::Find(const std::vector<int>& ranks) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, members] : sets_) {
    if (*members == ranks) return id;
  }
  return -1;
}

bool ProcessSetTable::EverySetHasEveryRank() const {
  absl::MutexLock lock(&mu_);
  return std::all_of(sets_.begin(), sets_.end(), [this](const auto& set) {
    return set.second->size() == world_size_;
  });
}

void ProcessSetTable::Add(int id, std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());  // as every rank orders them
  absl::MutexLock lock(&mu_);
  sets_[id] = std::make_shared<const std::vector<int>>(std::move(ranks));
}

void ProcessSetTable::Remove(int id) {
  absl::MutexLock lock(&mu_);
  if (id != 0) sets_.erase(id);
}

}  // namespace hvd::runtime
