// What the rendezvous service's client and server both rely on beyond the
// messages themselves (proto/rendezvous.proto): the bounds of one GetMany
// call, and the trailing metadata of a Barrier that timed out.
#ifndef HVD_PROTO_RENDEZVOUS_BOUNDS_H_
#define HVD_PROTO_RENDEZVOUS_BOUNDS_H_

#include <cstddef>

namespace hvd {
namespace rendezvous {

// The most keys one GetMany answers; clients split longer lists.
inline constexpr int kMaxKeysPerGetMany = 4096;
// The most value bytes one GetMany answer carries (it carries at least one
// value whatever its size): under gRPC's default 4 MB message limit with
// room for the framing of 4096 values.
inline constexpr size_t kMaxGetManyAnswerBytes = size_t{3} << 20;
// Trailing metadata of a timed-out Barrier: how many had arrived.
inline constexpr char kBarrierArrivedKey[] = "hvd-barrier-arrived";

}  // namespace rendezvous
}  // namespace hvd

#endif  // HVD_PROTO_RENDEZVOUS_BOUNDS_H_
