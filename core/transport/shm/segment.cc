#include "core/transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/transport/shm/layout.h"

namespace hvd::transport::shm_internal {
namespace {

absl::Status Errno(absl::string_view what, const std::string& name, int err) {
  const std::string message =
      absl::StrCat(what, " shared memory ", name, ": ", std::strerror(err));
  if (err == EEXIST) return absl::AlreadyExistsError(message);
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::UnavailableError(message);
}

// madvise(MADV_POPULATE_WRITE), Linux 5.14; older headers lack the name.
#ifdef MADV_POPULATE_WRITE
constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kPopulateWrite = 23;
#endif

}  // namespace

Segment::Segment(std::string name, int fd, char* data, size_t size,
                 bool owner)
    : name_(std::move(name)),
      fd_(fd),
      data_(data),
      size_(size),
      linked_(owner) {}

absl::StatusOr<std::unique_ptr<Segment>> Segment::Create(
    const std::string& name, size_t bytes, size_t reserved) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return Errno("cannot create", name, errno);
  reserved = std::min(reserved, bytes);
  absl::Status failure;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    failure = Errno(absl::StrCat("cannot size (", bytes, " bytes)"), name,
                    errno);
  } else if (reserved > 0) {
    // Reserved now, a full /dev/shm fails here with ENOSPC instead of a
    // SIGBUS on first touch.
    if (int err = posix_fallocate(fd, 0, static_cast<off_t>(reserved));
        err != 0) {
      failure = Errno(absl::StrCat("cannot allocate ", reserved, " bytes of"),
                      name, err);
    }
  }
  void* data = MAP_FAILED;
  if (failure.ok()) {
    // No MAP_POPULATE: it would allocate the unreserved rest, unchecked.
    data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) failure = Errno("cannot map", name, errno);
  }
  if (!failure.ok()) {
    close(fd);
    shm_unlink(name.c_str());
    return failure;
  }
  auto segment = std::unique_ptr<Segment>(
      new Segment(name, fd, static_cast<char*>(data), bytes, /*owner=*/true));
  segment->Prefault(0, reserved);
  return segment;
}

absl::StatusOr<std::unique_ptr<Segment>> Segment::Open(
    const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return Errno("cannot open", name, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return Errno("cannot stat", name, err);
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return Errno("cannot map", name, err);
  }
  return std::unique_ptr<Segment>(
      new Segment(name, fd, static_cast<char*>(data), bytes, /*owner=*/false));
}

Segment::~Segment() {
  Unlink();
  munmap(data_, size_);
  close(fd_);
}

absl::Status Segment::Reserve(size_t offset, size_t bytes) const {
  if (offset >= size_) return absl::OkStatus();
  bytes = std::min(bytes, size_ - offset);
  if (bytes == 0) return absl::OkStatus();
  const int err = posix_fallocate(fd_, static_cast<off_t>(offset),
                                  static_cast<off_t>(bytes));
  if (err == 0) return absl::OkStatus();
  const std::string message =
      absl::StrCat("cannot allocate bytes [", offset, ", ", offset + bytes,
                   ") of shared memory ", name_, ": ", std::strerror(err));
  return err == ENOSPC ? absl::ResourceExhaustedError(message)
                       : absl::UnavailableError(message);
}

void Segment::Prefault(size_t offset, size_t bytes) const {
  if (offset >= size_) return;
  bytes = std::min(bytes, size_ - offset);
  const size_t start = offset / kPage * kPage;
  madvise(data_ + start, bytes + (offset - start), kPopulateWrite);
}

void Segment::Unlink() {
  if (!linked_) return;
  linked_ = false;
  shm_unlink(name_.c_str());
}

}  // namespace hvd::transport::shm_internal
