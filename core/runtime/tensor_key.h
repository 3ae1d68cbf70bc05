// How the runtime keys a tensor: by its process set and name. The names in
// flight, the response cache and a rank's pending ops look tensors up by key
// for every tensor of every step, so the containers here hash (no name
// comparisons) and find a key by a view of its name (no copy of it).
#ifndef HVD_CORE_RUNTIME_TENSOR_KEY_H_
#define HVD_CORE_RUNTIME_TENSOR_KEY_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace hvd::runtime {

// (process set, name).
using TensorKey = std::pair<int, std::string>;
using TensorKeyView = std::pair<int, std::string_view>;

struct TensorKeyHash {
  using is_transparent = void;
  template <typename Key>
  size_t operator()(const Key& key) const {
    const std::string_view name(key.second);
    return absl::HashOf(key.first, absl::string_view(name.data(), name.size()));
  }
};

struct TensorKeyEq {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return a.first == b.first &&
           std::string_view(a.second) == std::string_view(b.second);
  }
};

template <typename Value>
using TensorKeyMap =
    absl::flat_hash_map<TensorKey, Value, TensorKeyHash, TensorKeyEq>;
using TensorKeySet = absl::flat_hash_set<TensorKey, TensorKeyHash, TensorKeyEq>;
// A TensorKeyMap whose values stay where they are while the map changes.
template <typename Value>
using StableTensorKeyMap =
    absl::node_hash_map<TensorKey, Value, TensorKeyHash, TensorKeyEq>;

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_TENSOR_KEY_H_
