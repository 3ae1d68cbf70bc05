#include "rdma/engine.h"

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/transport/tcp/handshake.h"

namespace hvd::rdma {
namespace {

// Uncredited messages one peer may have in flight: hello, its reply, two
// credit returns, abort, bye, and spare.
constexpr size_t kSlackSlots = 8;
constexpr size_t kMaxReasonBytes = 1024;
// The first slab's key when the application chooses keys (the cache counts
// up from 0, the slabs from here).
constexpr uint64_t kSlabKey = uint64_t{1} << 40;
// Receive and send slots for the hellos (and replies) of peers not known
// yet; each known peer adds credits + kSlackSlots of each.
constexpr size_t kUnknownPeerSlots = 32;
// Silence from a peer with pending requests after which it is pinged.
constexpr absl::Duration kProbeAfter = absl::Milliseconds(250);

}  // namespace

Engine::Engine(int rank, int size, std::unique_ptr<Fabric> fabric,
               const RdmaOptions& options, NameLookup lookup)
    : rank_(rank),
      size_(size),
      options_(options),
      fabric_(std::move(fabric)),
      cache_(std::make_unique<RegistrationCache>(
          fabric_->domain(), fabric_->virt_addr(), fabric_->prov_key(),
          options.tuning.max_registration_bytes)),
      peers_(size),
      lookups_(rank, options.connect_timeout, std::move(lookup),
               [this](int peer, absl::StatusOr<std::string> name) {
                 OnNameFound(peer, std::move(name));
               }) {
  for (Peer& p : peers_) p.credits = options_.tuning.credits;
  ordered_writes_ = fabric_->ordered_writes(
      std::min(options_.tuning.write_piece_bytes,
               options_.tuning.max_registration_bytes));
}

Engine::~Engine() { Shutdown(); }

absl::Status Engine::Start() {
  absl::MutexLock lock(&mu_);
  if (size_ > 1) {
    if (absl::Status s = AddSlab(kUnknownPeerSlots, kUnknownPeerSlots);
        !s.ok()) {
      return s;
    }
  }
  progress_ = std::thread([this] { ProgressLoop(); });
  return status_;
}

absl::Status Engine::AddSlab(size_t rx, size_t tx) {
  auto slab = std::make_unique<Slab>();
  slab->mem.resize((rx + tx) * kControlBytes);
  // Each slab its own key where the application chooses them.
  const uint64_t key = fabric_->prov_key() ? 0 : kSlabKey + slabs_.size();
  const int rc =
      fi_mr_reg(fabric_->domain(), slab->mem.data(), slab->mem.size(),
                FI_SEND | FI_RECV, 0, key, 0, &slab->mr, nullptr);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("rank ", rank_, ": ", FiError("fi_mr_reg", rc)));
  }
  void* desc = fi_mr_desc(slab->mr);
  slab->slots.resize(rx + tx);
  Slab& added = *slabs_.emplace_back(std::move(slab));
  for (size_t i = 0; i < added.slots.size(); ++i) {
    Slot& slot = added.slots[i];
    slot.buf = added.mem.data() + i * kControlBytes;
    slot.desc = desc;
    slot.kind = i < rx ? CtxKind::kRecvSlot : CtxKind::kSendSlot;
    if (i < rx) {
      RepostReceive(&slot);
    } else {
      free_tx_.push_back(&slot);
    }
  }
  tx_slots_ += tx;
  return absl::OkStatus();
}

size_t Engine::control_buffer_bytes() const {
  absl::MutexLock lock(&mu_);
  size_t bytes = 0;
  for (const auto& slab : slabs_) bytes += slab->mem.size();
  return bytes;
}

std::string Engine::PeerAddress(int peer) const {
  absl::MutexLock lock(&mu_);
  return AddressLocked(peer);
}

std::string Engine::AddressLocked(int peer) const {
  if (peer < 0 || peer >= size_) return "";
  const Peer& p = peers_[peer];
  return Known(p) ? p.address : "not connected";
}

std::string Engine::Who(int peer) const {
  return absl::StrCat("rank ", peer, " (", AddressLocked(peer), ")");
}

void Engine::Contact(int peer) {
  // LookupThread looks each peer up once, and fails it when it finds none.
  if (!Known(peers_[peer])) lookups_.Add(peer);
}

void Engine::OnNameFound(int peer, absl::StatusOr<std::string> name) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  if (!name.ok()) return FailLocked(name.status());
  if (absl::Status s = Insert(peer, *name); !s.ok()) return FailLocked(s);
  PumpPeer(peer);
}

absl::Status Engine::Insert(int peer, const std::string& name) {
  Peer& p = peers_[peer];
  if (Known(p)) return absl::OkStatus();
  fi_addr_t addr = FI_ADDR_NOTAVAIL;
  const int rc = fi_av_insert(fabric_->av(), name.data(), 1, &addr, 0, nullptr);
  if (rc != 1 || addr == FI_ADDR_NOTAVAIL) {
    return absl::UnavailableError(
        absl::StrCat("rank ", rank_, ": fi_av_insert of rank ", peer,
                     "'s address ", fabric_->AddressString(name), " failed"));
  }
  const size_t per_peer = options_.tuning.credits + kSlackSlots;
  if (absl::Status s = AddSlab(per_peer, per_peer); !s.ok()) return s;
  p.fi_addr = addr;
  p.address = fabric_->AddressString(name);
  p.contact_deadline = absl::Now() + options_.connect_timeout;
  handshaking_.insert(peer);
  SendHellos();
  return absl::OkStatus();
}

void Engine::CheckContacts() {
  const absl::Time now = absl::Now();
  for (int peer : handshaking_) {
    if (now > peers_[peer].contact_deadline) {
      return FailLocked(HandshakeTimeout(peer));
    }
  }
}

void Engine::Handshaken(int peer) {
  Peer& p = peers_[peer];
  handshaking_.erase(peer);
  if (!status_.ok() && !shut_down_) {
    // This rank failed before the peer reached it: the peer learns why.
    const std::string reason(status_.message().substr(
        0, std::min(status_.message().size(), kMaxReasonBytes)));
    Queue(peer, MsgType::kAbort, 0, reason);
  }
  if (p.early_end) {
    const auto [header, body] = *std::move(p.early_end);
    p.early_end.reset();
    OnMessage(peer, header, body.data());
  }
  PumpPeer(peer);
}

absl::Status Engine::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void Engine::Post(std::shared_ptr<Op> op) {
  absl::MutexLock lock(&mu_);
  const int peer = op->peer();
  if (peer < 0 || peer >= size_ || peer == rank_) {
    op->Complete(absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank_, ": ", transport::OpKindName(op->kind()), " with peer ",
        peer, ", which is not another rank of this size-", size_,
        " context")));
    return;
  }
  if (!status_.ok()) {
    op->Complete(status_);
    return;
  }
  Contact(peer);
  if (op->kind() == Op::Kind::kSend) {
    PostSend(op);
  } else {
    PostRecv(op);
  }
  PumpPeer(peer);
}

absl::Status Engine::RegisterOp(Op& op) {
  const size_t max = cache_->max_entry_bytes();
  for (size_t off = 0; off < op.len(); off += max) {
    auto reg = cache_->Acquire(op.data() + off, std::min(max, op.len() - off));
    if (!reg.ok()) {
      return absl::Status(reg.status().code(),
                          absl::StrCat("rank ", rank_, ": ",
                                       transport::OpKindName(op.kind()),
                                       " with ", Who(op.peer()), ": ",
                                       reg.status().message()));
    }
    op.regs.push_back(*std::move(reg));
  }
  return absl::OkStatus();
}

void Engine::PostRecv(const std::shared_ptr<Op>& op) {
  Peer& p = peers_[op->peer()];
  op->seq = p.next_recv_seq++;
  p.receiving[op->seq] = op;
  if (op->kind() == Op::Kind::kRecvAny) {
    Queue(op->peer(), MsgType::kAdvertAny, op->seq, "");
    return;
  }
  if (absl::Status s = RegisterOp(*op); !s.ok()) return FailLocked(s);
  if (op->regs.size() > kMaxChunks) {
    return FailLocked(absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank_, ": Recv of ", op->len(), " bytes from ",
        Who(op->peer()), " needs ", op->regs.size(),
        " registrations, more than an advert holds (", kMaxChunks, ")")));
  }
  std::vector<RemoteChunk> chunks;
  const size_t max = cache_->max_entry_bytes();
  for (size_t i = 0; i < op->regs.size(); ++i) {
    chunks.push_back({op->regs[i]->RemoteAddress(0), op->regs[i]->key(),
                      std::min(max, op->len() - i * max)});
  }
  Queue(op->peer(), MsgType::kAdvert, op->seq,
        EncodeAdvert(op->len(), chunks));
}

void Engine::PostSend(const std::shared_ptr<Op>& op) {
  if (absl::Status s = RegisterOp(*op); !s.ok()) return FailLocked(s);
  Peer& p = peers_[op->peer()];
  op->seq = p.next_send_seq++;
  p.sends.push_back(op);
  StartSends(op->peer());
}

void Engine::Queue(int peer, MsgType type, uint16_t seq, std::string body) {
  const bool credited = type != MsgType::kHello &&
                        type != MsgType::kHelloReply &&
                        type != MsgType::kCredit && type != MsgType::kAbort &&
                        type != MsgType::kBye && type != MsgType::kPing;
  Peer& p = peers_[peer];
  (credited ? p.credited : p.free).push_back({type, seq, std::move(body)});
}

void Engine::Pump() {
  SendHellos();
  if (status_.ok() && !shut_down_) {
    CheckContacts();
    ProbePeers();
  }
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) PumpPeer(peer);
  }
}

void Engine::PumpPeer(int peer) {
  Peer& p = peers_[peer];
  if (!Known(p)) return;
  while (!p.free.empty() && PostControl(peer, p.free.front())) {
    p.free.pop_front();
  }
  if (!Ready(p)) return;
  while (!p.credited.empty() && p.credits > 0 &&
         PostControl(peer, p.credited.front())) {
    --p.credits;
    p.credited.pop_front();
  }
  const std::deque<std::shared_ptr<Op>> sends = p.sends;
  for (const auto& op : sends) {
    if (op->started && op->pieces_posted < op->pieces.size() &&
        !PostWrites(peer, op)) {
      break;
    }
  }
}

bool Engine::PostControl(int peer, const OutMsg& msg) {
  if (free_tx_.empty()) return false;
  Peer& p = peers_[peer];
  Slot* slot = free_tx_.back();
  const Header h{msg.type, msg.seq, static_cast<uint32_t>(rank_), p.owed,
                 static_cast<uint32_t>(msg.body.size())};
  EncodeHeader(h, slot->buf);
  std::memcpy(slot->buf + kHeaderBytes, msg.body.data(), msg.body.size());
  const ssize_t rc =
      fi_send(fabric_->ep(), slot->buf, kHeaderBytes + msg.body.size(),
              slot->desc, p.fi_addr, &slot->fi);
  if (rc == -FI_EAGAIN) {
    retry_ = true;
    return false;
  }
  if (rc != 0) {
    // Dropped; a failing abort or goodbye must not recurse.
    if (msg.type != MsgType::kAbort && msg.type != MsgType::kBye) {
      FailLocked(absl::UnavailableError(absl::StrCat(
          "rank ", rank_, ": sending to ", Who(peer), ": ",
          FiError("fi_send", rc))));
    }
    return true;
  }
  free_tx_.pop_back();
  slot->peer = peer;
  slot->type = msg.type;
  p.owed = 0;
  return true;
}

void Engine::StartSends(int peer) {
  Peer& p = peers_[peer];
  std::vector<std::pair<std::shared_ptr<Op>, Advert>> ready;
  for (const auto& op : p.sends) {
    if (op->started) continue;
    auto it = p.adverts.find(op->seq);
    if (it == p.adverts.end()) break;
    ready.emplace_back(op, std::move(it->second));
    p.adverts.erase(it);
  }
  for (auto& [op, advert] : ready) StartSend(peer, op, std::move(advert));
}

void Engine::FinishSend(int peer, Op* op, absl::Status status) {
  op->Complete(std::move(status));
  auto& sends = peers_[peer].sends;
  sends.erase(std::remove_if(sends.begin(), sends.end(),
                             [op](const auto& s) { return s.get() == op; }),
              sends.end());
}

void Engine::SendHellos() {
  const absl::Time now = absl::Now();
  for (int peer : handshaking_) {
    Peer& p = peers_[peer];
    if (p.accepted || p.hello_in_flight || now < p.hello_due) continue;
    p.hello_in_flight = true;
    // The token, then this rank's endpoint name: the peer may not have
    // looked it up.
    Queue(peer, MsgType::kHello, 0,
          transport::tcp_internal::EncodeHello(rank_, size_, options_.token) +
              fabric_->endpoint_name());
  }
}

void Engine::ProbePeers() {
  const absl::Time now = absl::Now();
  for (int peer = 0; peer < size_; ++peer) {
    Peer& p = peers_[peer];
    if (peer == rank_ || !p.authenticated) continue;
    if (p.ping_in_flight && now - p.ping_sent > options_.probe_timeout) {
      return FailLocked(absl::UnavailableError(absl::StrCat(
          "rank ", rank_, ": connection to ", Who(peer),
          " lost: a probe was not delivered within ",
          absl::FormatDuration(options_.probe_timeout))));
    }
    if (p.ping_in_flight || (p.receiving.empty() && p.sends.empty()) ||
        now - p.last_heard < kProbeAfter) {
      continue;
    }
    p.ping_in_flight = true;
    p.ping_sent = now;
    p.last_heard = now;
    Queue(peer, MsgType::kPing, 0, "");
  }
}

template <typename Why>
void Engine::FailAllOps(const Why& why) {
  for (int peer = 0; peer < size_; ++peer) {
    Peer& p = peers_[peer];
    for (auto& op : p.sends) op->Complete(why(peer));
    for (auto& [seq, op] : p.receiving) op->Complete(why(peer));
    p.sends.clear();
    p.receiving.clear();
    p.adverts.clear();
    p.credited.clear();
  }
}

void Engine::Fail(absl::Status status) {
  absl::MutexLock lock(&mu_);
  FailLocked(std::move(status));
}

void Engine::FailLocked(absl::Status status) {
  if (!status_.ok()) return;
  status_ = status;
  FailAllOps([&](int) { return status; });
  if (shut_down_) return;
  const std::string reason(
      status.message().substr(0, std::min(status.message().size(),
                                          kMaxReasonBytes)));
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || !peers_[peer].authenticated) continue;
    Queue(peer, MsgType::kAbort, 0, reason);
    PumpPeer(peer);
  }
}

void Engine::WaitForSendsToDrain(absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  absl::MutexLock lock(&mu_);
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const Peer& p : peers_) {
      if (!p.free.empty()) return false;
    }
    return free_tx_.size() == tx_slots_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&drained), deadline);
}

void Engine::Shutdown() {
  lookups_.Close();  // its answers take mu_
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    // Cancel first, so that what peers answer to the goodbye cannot replace
    // the reason.
    const bool healthy = status_.ok();
    FailAllOps([this](int peer) {
      return absl::CancelledError(absl::StrCat(
          "rank ", rank_,
          ": RDMA transport context destroyed while a request to or from "
          "rank ",
          peer, " was pending"));
    });
    if (healthy) {
      status_ = absl::CancelledError(
          absl::StrCat("rank ", rank_, ": RDMA transport context destroyed"));
    }
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_ || !peers_[peer].authenticated || !healthy) continue;
      Queue(peer, MsgType::kBye, 0, "");
      PumpPeer(peer);
    }
  }
  if (progress_.joinable()) {
    WaitForSendsToDrain(absl::Milliseconds(200));
    stopping_.store(true);
    fi_cq_signal(fabric_->cq());
    progress_.join();
  }
  fabric_->CloseEndpoint();
  absl::MutexLock lock(&mu_);
  writes_.clear();
  for (auto& slab : slabs_) {
    if (slab->mr != nullptr) fi_close(&slab->mr->fid);
    slab->mr = nullptr;
  }
}

}  // namespace hvd::rdma
