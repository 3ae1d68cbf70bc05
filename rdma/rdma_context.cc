#include "rdma/rdma_context.h"

#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/common/annotate.h"
#include "rdma/engine.h"
#include "rdma/fabric.h"
#include "rdma/op.h"

namespace hvd::rdma {
namespace {

constexpr char kRecordMagic[] = "hvd-rdma-1";
constexpr char kRecordKey[] = "rdma/";

class RdmaRequest final : public transport::Request {
 public:
  RdmaRequest(std::shared_ptr<Engine> engine, std::shared_ptr<Op> op)
      : engine_(std::move(engine)), op_(std::move(op)) {}

  absl::Status Wait(absl::Time deadline) override {
    if (op_->AwaitDone(deadline)) return op_->status();
    return absl::DeadlineExceededError(absl::StrCat(
        "rank ", engine_->rank(), ": ", transport::OpKindName(op_->kind()),
        op_->kind() == Op::Kind::kSend ? " to rank " : " from rank ",
        op_->peer(), " (", engine_->PeerAddress(op_->peer()),
        ") not complete by the deadline: ", op_->bytes_done(), " of ",
        op_->len(), " bytes transferred"));
  }
  bool Done() override { return op_->done(); }

 private:
  const std::shared_ptr<Engine> engine_;
  const std::shared_ptr<Op> op_;
};

class RdmaContext final : public transport::Context {
 public:
  explicit RdmaContext(std::shared_ptr<Engine> engine)
      : engine_(std::move(engine)) {}
  ~RdmaContext() override { engine_->Shutdown(); }
  RdmaContext(const RdmaContext&) = delete;
  RdmaContext& operator=(const RdmaContext&) = delete;

  int rank() const override { return engine_->rank(); }
  int size() const override { return engine_->size(); }
  std::unique_ptr<transport::Request> Send(int peer, const void* data,
                                           size_t len) override {
    return Post(std::make_shared<Op>(
        Op::Kind::kSend, peer,
        const_cast<char*>(static_cast<const char*>(data)), len, nullptr));
  }
  std::unique_ptr<transport::Request> Recv(int peer, void* data,
                                           size_t len) override {
    return Post(std::make_shared<Op>(Op::Kind::kRecv, peer,
                                     static_cast<char*>(data), len, nullptr));
  }
  std::unique_ptr<transport::Request> RecvAny(int peer,
                                              std::string* out) override {
    return Post(
        std::make_shared<Op>(Op::Kind::kRecvAny, peer, nullptr, 0, out));
  }
  void Abort(absl::Status reason) override { engine_->Fail(std::move(reason)); }
  absl::Status status() const override { return engine_->status(); }
  std::string PeerAddress(int peer) const override {
    return engine_->PeerAddress(peer);
  }
  RegistrationStats registration_stats() const {
    return engine_->registration_stats();
  }
  size_t control_buffer_bytes() const {
    return engine_->control_buffer_bytes();
  }

 private:
  std::unique_ptr<transport::Request> Post(std::shared_ptr<Op> op) {
    engine_->Post(op);
    return std::make_unique<RdmaRequest>(engine_, std::move(op));
  }

  const std::shared_ptr<Engine> engine_;
};

// A rank's record in the store, under kRecordKey + its rank: the magic,
// its provider and its endpoint name in hex, a line each.
std::string EncodeRecord(const Fabric& fabric) {
  return absl::StrCat(kRecordMagic, "\n", fabric.provider_name(), "\n",
                      absl::BytesToHexString(fabric.endpoint_name()));
}

// Looks peers' records up in `store`, all in one GetMany, and checks that
// each is hvd's and of `provider`.
Engine::NameLookup StoreLookup(std::shared_ptr<Store> store,
                               std::string provider) {
  return transport::StoreRecords<std::string>(
      std::move(store), kRecordKey,
      [provider = std::move(provider)](
          int peer, const std::string& text) -> absl::StatusOr<std::string> {
        std::vector<std::string> fields = absl::StrSplit(text, '\n');
        if (fields.size() != 3 || fields[0] != kRecordMagic) {
          return absl::InvalidArgumentError(
              absl::StrCat("rank ", peer,
                           "'s RDMA address in the store is not an hvd "
                           "RDMA address record"));
        }
        if (fields[1] != provider) {
          return absl::FailedPreconditionError(
              absl::StrCat("rank ", peer, " uses libfabric provider '",
                           fields[1], "', this rank '", provider, "'"));
        }
        return absl::HexStringToBytes(fields[2]);
      });
}

}  // namespace

absl::StatusOr<std::unique_ptr<transport::Context>> CreateRdmaContext(
    int rank, int size, std::shared_ptr<Store> store,
    const RdmaOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CreateRdmaContext: rank ", rank, " is not in a job of size ", size));
  }
  if (store == nullptr && size > 1) {
    return absl::InvalidArgumentError("CreateRdmaContext: no store");
  }
  if (size > (1 << 16)) {
    return absl::InvalidArgumentError(
        "CreateRdmaContext: more than 65536 ranks do not fit remote CQ data");
  }
  const size_t cq_entries = 4 * static_cast<size_t>(size) *
                            (options.tuning.credits + 8);
  auto fabric = Fabric::Open(options.provider, cq_entries);
  if (!fabric.ok()) {
    return Annotate(fabric.status(), absl::StrCat("rank ", rank));
  }
  const std::string record = EncodeRecord(**fabric);
  Engine::NameLookup lookup = StoreLookup(store, (*fabric)->provider_name());
  auto engine = std::make_shared<Engine>(rank, size, *std::move(fabric),
                                         options, std::move(lookup));
  if (absl::Status s = engine->Start(); !s.ok()) {
    return Annotate(s, absl::StrCat("rank ", rank));
  }
  // Published once the endpoint is up: a peer that finds it can say Hello.
  if (size > 1) {
    if (absl::Status s = store->Set(absl::StrCat(kRecordKey, rank), record);
        !s.ok()) {
      return Annotate(
          s, absl::StrCat("rank ", rank, ": publishing its RDMA address"));
    }
  }
  return std::make_unique<RdmaContext>(std::move(engine));
}

RegistrationStats RdmaRegistrationStats(const transport::Context& context) {
  const auto* rdma = dynamic_cast<const RdmaContext*>(&context);
  return rdma != nullptr ? rdma->registration_stats() : RegistrationStats{};
}

size_t RdmaControlBufferBytes(const transport::Context& context) {
  const auto* rdma = dynamic_cast<const RdmaContext*>(&context);
  return rdma != nullptr ? rdma->control_buffer_bytes() : 0;
}

}  // namespace hvd::rdma
