// A POSIX shared-memory object mapped into this process. The creator owns
// the name and unlinks it (at the latest on destruction); after unlinking,
// the mapping stays valid in every process that has it until each unmaps.
#ifndef HVD_CORE_TRANSPORT_SHM_SEGMENT_H_
#define HVD_CORE_TRANSPORT_SHM_SEGMENT_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace hvd::transport::shm_internal {

// Thread-compatible.
class Segment {
 public:
  // Creates and maps a new zero-filled object `name` ("/hvd-...") of `bytes`
  // bytes, mode 0600. AlreadyExists if the name is taken; Unavailable (with
  // errno text) when /dev/shm refuses.
  static absl::StatusOr<std::unique_ptr<Segment>> Create(
      const std::string& name, size_t bytes);
  // Maps an existing object read-write, its pages faulted in only as they
  // are touched (a rank uses one ring of each peer's segment: see
  // Prefault). NotFound if there is none.
  static absl::StatusOr<std::unique_ptr<Segment>> Open(
      const std::string& name);

  ~Segment();  // Unmaps; unlinks the name if this process created it.
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

  // Removes the name (creator only; idempotent). Mappings stay valid.
  void Unlink();

  // Maps the pages of [offset, offset + bytes) now, writable, so that the
  // data path does not take their page faults; best effort (the kernel may
  // lack MADV_POPULATE_WRITE, and then they fault in on first use).
  void Prefault(size_t offset, size_t bytes) const;

 private:
  Segment(std::string name, char* data, size_t size, bool owner);

  const std::string name_;
  char* const data_;
  const size_t size_;
  bool linked_;  // this process created the name and has not unlinked it
};

}  // namespace hvd::transport::shm_internal

#endif  // HVD_CORE_TRANSPORT_SHM_SEGMENT_H_
