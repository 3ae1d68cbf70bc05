// A POSIX shared-memory object mapped into this process. The creator owns
// the name and unlinks it (at the latest on destruction); after unlinking,
// the mapping stays valid in every process that has it until each unmaps.
//
// Pages of the object are reserved (allocated in /dev/shm) explicitly: the
// creator reserves a prefix at creation, and whoever is about to write a
// range reserves it first with Reserve(). Writing a page that was never
// reserved still works while /dev/shm has room, but on a full /dev/shm it
// raises SIGBUS, where Reserve() returns an error.
#ifndef HVD_CORE_TRANSPORT_SHM_SEGMENT_H_
#define HVD_CORE_TRANSPORT_SHM_SEGMENT_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hvd::transport::shm_internal {

// Thread-compatible; Reserve() and Prefault() are thread-safe.
class Segment {
 public:
  // Creates and maps a new zero-filled object `name` ("/hvd-...") of `bytes`
  // bytes, mode 0600, and reserves and maps its first `reserved` bytes
  // (clipped to `bytes`) now; the rest is reserved by Reserve() as it comes
  // into use. AlreadyExists if the name is taken; Unavailable (with errno
  // text) when /dev/shm refuses, a full one included.
  static absl::StatusOr<std::unique_ptr<Segment>> Create(
      const std::string& name, size_t bytes, size_t reserved);
  // Maps an existing object read-write, its pages faulted in only as they
  // are touched (a rank uses one ring of each peer's segment: see
  // Prefault). NotFound if there is none.
  static absl::StatusOr<std::unique_ptr<Segment>> Open(
      const std::string& name);

  // Unmaps and closes; unlinks the name if this process created it.
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

  // Removes the name (creator only; idempotent). Mappings stay valid, and
  // so does Reserve(): it works on the descriptor each Segment keeps open.
  void Unlink();

  // Reserves the pages of [offset, offset + bytes) (clipped to the object)
  // in /dev/shm now (posix_fallocate), so that writing them cannot raise
  // SIGBUS; reserving a range again costs a system call and changes
  // nothing. ResourceExhausted when /dev/shm has no room for them,
  // Unavailable for any other refusal; the message names the object, the
  // range and the errno text.
  absl::Status Reserve(size_t offset, size_t bytes) const;

  // Maps the pages of [offset, offset + bytes) now, writable, so that the
  // data path does not take their page faults; best effort (the kernel may
  // lack MADV_POPULATE_WRITE, and then they fault in on first use). Only
  // for reserved ranges: populating a hole allocates it unchecked.
  void Prefault(size_t offset, size_t bytes) const;

 private:
  Segment(std::string name, int fd, char* data, size_t size, bool owner);

  const std::string name_;
  const int fd_;  // open for Reserve() until destruction
  char* const data_;
  const size_t size_;
  bool linked_;  // this process created the name and has not unlinked it
};

}  // namespace hvd::transport::shm_internal

#endif  // HVD_CORE_TRANSPORT_SHM_SEGMENT_H_
