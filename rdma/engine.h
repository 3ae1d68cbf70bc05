// The protocol engine of one RDMA context: the libfabric endpoint, the
// per-peer queues and credits, and the progress thread that polls the
// completion queue. RdmaContext and its Requests hold it by shared_ptr.
//
// Locking: one mutex (mu_) guards all protocol state and every posting call
// into libfabric (the domain is FI_THREAD_SAFE, so the progress thread reads
// the CQ without it). Ops complete under mu_; waiters sleep on the op.
#ifndef HVD_RDMA_ENGINE_H_
#define HVD_RDMA_ENGINE_H_

#include <rdma/fabric.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/transport/lookup_thread.h"
#include "rdma/fabric.h"
#include "rdma/op.h"
#include "rdma/rdma_options.h"
#include "rdma/registration_cache.h"
#include "rdma/wire.h"

namespace hvd::rdma {

// Every libfabric operation's context starts with fi_context2 (the
// FI_CONTEXT2 mode), followed by what it is.
enum class CtxKind { kRecvSlot, kSendSlot, kWrite };

// One kControlBytes piece of the registered control slab.
struct Slot {
  fi_context2 fi;
  CtxKind kind;
  char* buf;
  void* desc = nullptr;     // its slab's registration
  int peer = -1;            // send slots: destination
  MsgType type = MsgType::kCredit;  // send slots: what they carry
};

// One fi_write / fi_writedata of a send.
struct WriteCtx {
  fi_context2 fi;
  CtxKind kind = CtxKind::kWrite;
  std::shared_ptr<Op> op;
  size_t piece = 0;
  bool last = false;
};

// Peers are reached lazily: a peer's endpoint name is looked up (`lookup`,
// on a thread of its own) at this rank's first op with it, or arrives in
// the peer's Hello, whichever comes first; it is then inserted into the
// address vector and the two ranks exchange Hellos with the job token. Ops
// with a peer wait for that handshake; one not done within
// options.connect_timeout of the first contact, a refused token and a
// lookup that fails each fail the context naming the peer.
class Engine {
 public:
  // The endpoint names (fi_getname's bytes) of peers, as LookupThread
  // looks them up.
  using NameLookup = transport::LookupThread<std::string>::Lookup;

  // `fabric` is open.
  Engine(int rank, int size, std::unique_ptr<Fabric> fabric,
         const RdmaOptions& options, NameLookup lookup);
  ~Engine();  // Shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Registers the control buffers, posts the receive buffers and starts
  // the progress thread. Unavailable on failure.
  absl::Status Start();
  // Tells the peers this context goes, stops the progress thread, fails
  // pending ops with Cancelled and closes the endpoint. Idempotent.
  void Shutdown();

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The peer's endpoint address once known, "not connected" before.
  std::string PeerAddress(int peer) const;
  RegistrationStats registration_stats() const { return cache_->stats(); }
  // Bytes of registered control buffers (the slabs).
  size_t control_buffer_bytes() const;

  // Posts `op`; completes it at once with the context's failure or an
  // InvalidArgument for a bad peer.
  void Post(std::shared_ptr<Op> op);
  // Records the first failure, fails every pending op, tells the peers.
  void Fail(absl::Status status);
  absl::Status status() const;

 private:
  struct Advert {
    bool any = false;
    uint64_t total = 0;
    std::vector<RemoteChunk> chunks;
  };
  struct OutMsg {
    MsgType type;
    uint16_t seq;
    std::string body;
  };
  struct Peer {
    // Its endpoint: known once inserted into the address vector.
    fi_addr_t fi_addr = FI_ADDR_NOTAVAIL;
    std::string address;
    // The handshake must be done by then (from when its name was known).
    absl::Time contact_deadline = absl::InfiniteFuture();
    // An Abort or Bye that came before its Hello, applied once the Hello
    // has shown the token.
    std::optional<std::pair<Header, std::string>> early_end;
    bool authenticated = false;  // its Hello carried our token
    bool accepted = false;       // it accepted our Hello
    absl::Time hello_due = absl::InfinitePast();
    bool hello_in_flight = false;
    std::string last_error;
    absl::Time last_heard = absl::Now();  // any message or write from it
    bool ping_in_flight = false;
    absl::Time ping_sent;  // when the probe in flight was queued
    int credits = 0;
    uint32_t owed = 0;  // credits to return
    uint16_t next_send_seq = 0;
    uint16_t next_recv_seq = 0;
    size_t write_bytes_in_flight = 0;  // posted writes not yet delivered
    std::deque<std::shared_ptr<Op>> sends;  // posted, not finished, in order
    std::map<uint16_t, Advert> adverts;     // received, not yet matched
    std::map<uint16_t, std::shared_ptr<Op>> receiving;  // advertised
    std::deque<OutMsg> credited;  // waiting for a credit or a slot
    std::deque<OutMsg> free;      // uncredited, waiting for a slot
  };

  // ---- engine.cc: posting ---------------------------------------------------
  void PostRecv(const std::shared_ptr<Op>& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PostSend(const std::shared_ptr<Op>& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Registers op's buffer in pieces of at most max_registration_bytes.
  absl::Status RegisterOp(Op& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Queue(int peer, MsgType type, uint16_t seq, std::string body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Posts whatever credits, slots and the provider's queues allow.
  void Pump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PumpPeer(int peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // False when the provider's queue is full (try again later).
  bool PostControl(int peer, const OutMsg& msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartSends(int peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishSend(int peer, Op* op, absl::Status status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendHellos() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts reaching `peer` (its name looked up) unless it is known.
  void Contact(int peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The lookup's answer for `peer`.
  void OnNameFound(int peer, absl::StatusOr<std::string> name);
  // Inserts `peer`'s endpoint (and says Hello) unless it is known.
  absl::Status Insert(int peer, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails the context for a peer whose handshake is past its deadline.
  void CheckContacts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Both sides of `peer`'s handshake are done: what waited for it goes.
  void Handshaken(int peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static bool Known(const Peer& p) { return p.fi_addr != FI_ADDR_NOTAVAIL; }
  static bool Ready(const Peer& p) { return p.authenticated && p.accepted; }
  // Pings peers that owe this rank data and were silent for a while: a
  // peer whose endpoint is gone then fails the ping's send.
  void ProbePeers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails every pending op with what `why(peer)` says.
  template <typename Why>
  void FailAllOps(const Why& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WaitForSendsToDrain(absl::Duration limit);
  std::string Who(int peer) const  // "rank P (address)"
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string AddressLocked(int peer) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- engine_writes.cc: a send's writes -----------------------------------
  void StartSend(int peer, const std::shared_ptr<Op>& op, Advert advert)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Cuts op into pieces at both sides' registrations and the piece size.
  absl::Status CutPieces(int peer, Op& op, const Advert& advert)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Posts op's pending writes as far as credits, the window and the
  // provider's queue allow; false if this peer's later sends must wait too.
  bool PostWrites(int peer, const std::shared_ptr<Op>& op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WindowAllows(const Peer& p, size_t len) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ssize_t PostWrite(int peer, const Op& op, const Piece& piece, bool last,
                    void* context) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- engine_completions.cc: the progress thread ---------------------------
  void ProgressLoop();
  void OnCompletion(const fi_cq_data_entry& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnError(const fi_cq_err_entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnControl(const char* buf, size_t len) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnMessage(int peer, const Header& h, const char* body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnHello(int peer, const char* body, size_t len)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnHelloReply(int peer, const char* body, size_t len)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnLength(int peer, uint16_t seq, uint64_t len)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnRemoteWrite(uint64_t data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnWriteDone(WriteCtx* ctx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReceivedCredited(int peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RepostReceive(Slot* slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandshakeTimeout(int peer) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int rank_;
  const int size_;
  const RdmaOptions options_;
  std::unique_ptr<Fabric> fabric_;
  std::unique_ptr<RegistrationCache> cache_;
  // The provider keeps writes in order (Fabric::ordered_writes): a send's
  // last write need not wait for the earlier ones to complete.
  bool ordered_writes_ = false;

  // The control buffers: registered slabs cut into kControlBytes slots,
  // some for receives (always posted), the rest for sends. One slab at
  // Start, for the hellos of peers not known yet, and one for each peer as
  // it becomes known (before it can send a credited message), so that a
  // rank's buffers grow with the peers it talks to, not with the job.
  struct Slab {
    std::vector<char> mem;
    fid_mr* mr = nullptr;
    std::vector<Slot> slots;
  };
  absl::Status AddSlab(size_t rx, size_t tx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::unique_ptr<Slab>> slabs_ ABSL_GUARDED_BY(mu_);
  size_t tx_slots_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread progress_;
  std::atomic<bool> stopping_{false};

  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<Peer> peers_ ABSL_GUARDED_BY(mu_);
  // Peers known and not Ready: those SendHellos and CheckContacts visit.
  std::set<int> handshaking_ ABSL_GUARDED_BY(mu_);
  std::vector<Slot*> free_tx_ ABSL_GUARDED_BY(mu_);
  std::map<WriteCtx*, std::unique_ptr<WriteCtx>> writes_ ABSL_GUARDED_BY(mu_);
  bool retry_ ABSL_GUARDED_BY(mu_) = false;  // a post met a full queue
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Declared last: closed first, its callback needing the rest.
  transport::LookupThread<std::string> lookups_;
};

}  // namespace hvd::rdma

#endif  // HVD_RDMA_ENGINE_H_
