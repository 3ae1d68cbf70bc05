// One agent's AgentService.Attach stream, as the job sees it: what the job
// queues for the agent goes out on a writer thread of the stream's own; what
// the agent sends is read on the gRPC thread that serves the call.
//
// Ownership and threading: an AgentConn lives on the stack of the gRPC
// thread serving its call (Job::Attach), from the accepted Hello to the end
// of the stream. Its state is guarded by the job's lock `mu` (not owned; it
// must outlive the connection), which the job holds anyway whenever it
// queues a message or checks a heartbeat: one lock, no ordering to get
// wrong. Serve() is the only method called without it.
#ifndef HVD_LAUNCHER_AGENT_CONN_H_
#define HVD_LAUNCHER_AGENT_CONN_H_

#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/launcher.grpc.pb.h"

namespace hvd {
namespace launcher {

class AgentConn {
 public:
  using Stream = grpc::ServerReaderWriter<LauncherMessage, AgentMessage>;

  // `context` is the call's (not owned); `now` counts as heard from.
  AgentConn(absl::Mutex* mu, grpc::ServerContext* context, absl::Time now);
  AgentConn(const AgentConn&) = delete;
  AgentConn& operator=(const AgentConn&) = delete;

  // The agent's address as the server saw its connection ("10.0.0.2" from
  // "ipv4:10.0.0.2:5123" or "ipv6:[::ffff:10.0.0.2]:5123"); empty if
  // neither.
  std::string peer_ip() const;

  // The state below is guarded by the job's lock, which this connection
  // shares (`mu`). The job calls this, holding it, before it uses the
  // connection: the thread-safety analysis cannot see that the two are one
  // mutex. Checks at run time too.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK(*mu_) {
    mu_->AssertHeld();
  }

  // The job's index of the agent's host; -1 until the job sets it.
  int host() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) { return host_; }
  void set_host(int host) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) { host_ = host; }
  // When the agent last sent anything.
  absl::Time last_heard() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) {
    return last_heard_;
  }
  void Heard(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) {
    last_heard_ = now;
  }

  // Queues `m` for the writer thread (sent in order).
  void Queue(LauncherMessage m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  // Cancels the call: the agent sees it fail, and Serve's reads end.
  void Cancel() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  // Cancels the call and has the writer stop once its queue is empty (the
  // writes of a cancelled call fail at once).
  void Close() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);

  // Runs the stream to its end: starts the writer, hands each message the
  // agent sends to `on_message` (called without the lock), and once the
  // reads end (the agent finished, or the call broke or was cancelled) calls
  // `on_ended` with the lock held; then has the writer stop once its queue
  // is empty, and joins it.
  void Serve(Stream* stream,
             absl::FunctionRef<void(const AgentMessage&)> on_message,
             absl::FunctionRef<void()> on_ended) ABSL_LOCKS_EXCLUDED(*mu_);

 private:
  void WriteLoop(Stream* stream) ABSL_LOCKS_EXCLUDED(*mu_);

  absl::Mutex* const mu_;
  grpc::ServerContext* const context_;
  int host_ ABSL_GUARDED_BY(*mu_) = -1;
  absl::Time last_heard_ ABSL_GUARDED_BY(*mu_);
  std::deque<LauncherMessage> outbox_ ABSL_GUARDED_BY(*mu_);
  bool stop_writer_ ABSL_GUARDED_BY(*mu_) = false;
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_AGENT_CONN_H_
