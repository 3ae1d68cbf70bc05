#include "core/transport/tcp/address_book.h"

#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/common/annotate.h"

namespace hvd::transport::tcp_internal {
namespace {

// "hvd-tcp-book-1\n<S>\n" then S pairs of lines "<host name>\n<a.b.c.d>,...
// \n", then "<shape>:<port>,..." for every rank; or "error <message>".
constexpr absl::string_view kBookVersion = "hvd-tcp-book-1";
constexpr absl::string_view kError = "error ";

// A record without its port: what ranks on one host share.
struct Shape {
  std::string hostname;
  std::string addresses;  // "a.b.c.d,..."
};

// An encoded record as its shape and port.
absl::StatusOr<std::pair<Shape, unsigned short>> ShapeOf(
    absl::string_view encoded) {
  absl::StatusOr<PeerRecord> decoded = DecodePeerRecord(encoded);
  if (!decoded.ok()) return decoded.status();
  const PeerRecord& record = *decoded;
  Shape shape{record.hostname, ""};
  const unsigned short port = record.endpoints.front().port();
  for (const Endpoint& e : record.endpoints) {
    if (e.port() != port) {
      return absl::InvalidArgumentError("its endpoints are on several ports");
    }
  }
  shape.addresses = absl::StrJoin(record.endpoints, ",",
                                  [](std::string* out, const Endpoint& e) {
                                    out->append(e.address().to_string());
                                  });
  return std::make_pair(std::move(shape), port);
}

absl::Status Unreadable(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "the TCP address book rank 0 published is unreadable (", why, ")"));
}

}  // namespace

std::string EncodeAddressBook(const std::vector<std::string>& records) {
  std::vector<Shape> shapes;
  absl::flat_hash_map<std::string, int> shape_index;  // by "host\naddresses"
  std::vector<std::string> entries;
  entries.reserve(records.size());
  for (size_t r = 0; r < records.size(); ++r) {
    absl::StatusOr<std::pair<Shape, unsigned short>> shaped =
        ShapeOf(records[r]);
    if (!shaped.ok()) {
      return absl::StrCat(kError, "rank ", r, "'s TCP address is unusable: ",
                          shaped.status().message());
    }
    Shape& shape = shaped->first;
    const auto [it, added] = shape_index.try_emplace(
        absl::StrCat(shape.hostname, "\n", shape.addresses),
        static_cast<int>(shapes.size()));
    if (added) shapes.push_back(std::move(shape));
    entries.push_back(absl::StrCat(it->second, ":", shaped->second));
  }
  std::string book = absl::StrCat(kBookVersion, "\n", shapes.size(), "\n");
  for (const Shape& s : shapes) {
    absl::StrAppend(&book, s.hostname, "\n", s.addresses, "\n");
  }
  absl::StrAppend(&book, absl::StrJoin(entries, ","));
  return book;
}

absl::StatusOr<AddressBook> AddressBook::Decode(absl::string_view text,
                                                int size) {
  if (absl::ConsumePrefix(&text, kError)) {
    return absl::InvalidArgumentError(text);
  }
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  size_t shape_count = 0;
  if (lines.size() < 3 || lines[0] != kBookVersion ||
      !absl::SimpleAtoi(lines[1], &shape_count) ||
      lines.size() != 3 + 2 * shape_count) {
    return Unreadable("format");
  }
  AddressBook book;
  book.shapes_.resize(shape_count);
  for (size_t s = 0; s < shape_count; ++s) {
    PeerRecord& shape = book.shapes_[s];
    shape.hostname = std::string(lines[2 + 2 * s]);
    for (absl::string_view a : absl::StrSplit(lines[3 + 2 * s], ',')) {
      const std::optional<Ipv4> ip = ParseIpv4(a);
      if (!ip) return Unreadable(absl::StrCat("address '", a, "'"));
      shape.endpoints.emplace_back(*ip, 0);  // each rank's port below
    }
  }
  book.ranks_.reserve(size);
  for (absl::string_view entry : absl::StrSplit(lines.back(), ',')) {
    const std::pair<absl::string_view, absl::string_view> f =
        absl::StrSplit(entry, absl::MaxSplits(':', 1));
    uint32_t shape = 0;
    const std::optional<unsigned short> port = ParsePort(f.second);
    if (!absl::SimpleAtoi(f.first, &shape) || shape >= shape_count || !port) {
      return Unreadable(absl::StrCat("entry '", entry, "'"));
    }
    book.ranks_.push_back(Entry{shape, *port});
  }
  if (book.size() != size) {
    return Unreadable(absl::StrCat(book.size(), " ranks for a job of ", size));
  }
  return book;
}

PeerRecord AddressBook::Record(int rank) const {
  const Entry& entry = ranks_[rank];
  PeerRecord record = shapes_[entry.shape];
  for (Endpoint& e : record.endpoints) e.port(entry.port);
  return record;
}

absl::StatusOr<AddressBook> ExchangeAddressBook(int rank, int size,
                                                const PeerRecord& mine,
                                                Store& store,
                                                absl::Duration timeout) {
  const std::string who = absl::StrCat("rank ", rank);
  absl::StatusOr<std::string> book = GatherThroughRoot(
      store, "tcp/", rank, size, EncodePeerRecord(mine),
      "every rank's TCP address", EncodeAddressBook, timeout);
  if (!book.ok()) return Annotate(book.status(), who);
  absl::StatusOr<AddressBook> decoded = AddressBook::Decode(*book, size);
  if (!decoded.ok()) return Annotate(decoded.status(), who);
  return decoded;
}

}  // namespace hvd::transport::tcp_internal
