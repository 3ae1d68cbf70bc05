// An elastic job's rounds and hosts: what ends a round, how the next one
// forms, which hosts run workers, blacklisting, and the job's limits.
#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "launcher/elastic_driver.h"

namespace hvd {
namespace launcher {
namespace {

std::string Seconds(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

// "1 slot", "2 slots".
std::string Count(int64_t n, absl::string_view noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

}  // namespace

// ---- Rounds -----------------------------------------------------------------

std::string ElasticDriver::Describe(const std::string& id) const {
  auto it = workers_.find(id);
  const std::string host = it == workers_.end() ? "?" : it->second.host;
  const Round* current = Current();
  const int rank = current ? RankIn(*current, id) : -1;
  return absl::StrCat("worker ", id, " (",
                      rank >= 0 ? absl::StrCat("rank ", rank, ", ") : "",
                      "host ", host, ")");
}

void ElasticDriver::EndRound(const std::string& why) {
  if (rounds_.empty() || rounds_.back().ended) return;
  elastic::RoundEvent e;
  e.set_kind(elastic::RoundEvent::ABORT);
  e.set_reason(why);
  rounds_.back().events.push_back(std::move(e));
  rounds_.back().ended = true;
}

void ElasticDriver::Announce(bool added, bool removed) {
  if (rounds_.empty() || rounds_.back().ended) return;
  elastic::RoundEvent e;
  e.set_kind(elastic::RoundEvent::HOSTS_UPDATED);
  e.set_seq(++update_seq_);
  e.set_added(added);
  e.set_removed(removed);
  rounds_.back().events.push_back(std::move(e));
}

void ElasticDriver::OpenRound(absl::Time now) {
  if (forming_.has_value() || finishing_) return;
  Forming f;
  f.number = static_cast<int>(rounds_.size());
  f.since = now;
  for (const auto& [id, w] : workers_) {
    if (!w.exited && w.leaving.empty()) f.expected.insert(id);
  }
  forming_ = std::move(f);
}

void ElasticDriver::TryForm(ElasticJobControl& job, absl::Time now) {
  if (!forming_.has_value()) return;
  Forming& f = *forming_;
  for (auto it = f.expected.begin(); it != f.expected.end();) {
    const Worker& w = workers_[*it];
    it = (w.exited || !w.leaving.empty()) ? f.expected.erase(it)
                                          : std::next(it);
  }
  const int need = rounds_.empty() ? settings_.np : settings_.min_np;
  if (f.expected.empty() || static_cast<int>(f.expected.size()) < need) return;
  for (const std::string& id : f.expected) {
    if (f.joined.count(id) == 0) return;
  }
  if (!rounds_.empty() && settings_.reset_limit.has_value() &&
      resets_ >= *settings_.reset_limit) {
    ended_ = true;
    job.EndJob(last_failure_code_,
               absl::StrCat("hvdrun: the job was reset ", resets_,
                            resets_ == 1 ? " time" : " times",
                            ", the limit (--reset-limit ",
                            *settings_.reset_limit, "); ending it"));
    return;
  }
  if (!rounds_.empty()) ++resets_;
  Round round;
  round.number = f.number;
  round.members.assign(f.expected.begin(), f.expected.end());
  // Members of the last round first, in their old order; then new workers
  // by number.
  const Round* last = Current();
  auto key = [&](const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int old = last ? RankIn(*last, id) : -1;
    return std::make_pair(old < 0 ? 1 : 0,
                          old < 0 ? workers_[id].number : old);
  };
  std::sort(round.members.begin(), round.members.end(),
            [&](const std::string& a, const std::string& b)
                ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return key(a) < key(b); });
  std::vector<std::string> host_of;
  for (const std::string& id : round.members) {
    host_of.push_back(workers_[id].host);
    workers_[id].last_round = round.number;
  }
  round.places = PlaceRanks(host_of);
  std::vector<std::string> hosts = host_of;
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  job.Say(absl::StrCat("hvdrun: elastic round ", round.number, ": ",
                       Count(static_cast<int64_t>(round.members.size()), "worker"), " on ",
                       absl::StrJoin(hosts, ", "), " (formed in ",
                       Seconds(now - f.since), ")"));
  rounds_.push_back(std::move(round));
  forming_.reset();
}

void ElasticDriver::Blacklist(Host& host, absl::Time now) {
  ++host.failures;
  if (settings_.cooldown_min <= absl::ZeroDuration()) {
    host.blacklisted_until = absl::InfiniteFuture();
    return;
  }
  // Jitter, so that hosts blacklisted together do not all return at once.
  static thread_local std::mt19937 bits{std::random_device{}()};
  absl::Duration d =
      settings_.cooldown_min * std::pow(2.0, std::min(host.failures - 1, 20)) +
      absl::Milliseconds(std::uniform_int_distribution<int>(0, 999)(bits));
  host.blacklisted_until = now + std::min(d, settings_.cooldown_max);
}

void ElasticDriver::FailWorkerHost(ElasticJobControl& job, int h,
                                   const std::string& why, absl::Time now) {
  std::string name;
  Host* host = HostOfJobIndex(h, &name);
  if (host == nullptr || !host->active) return;
  Blacklist(*host, now);
  RemoveHost(job, *host, absl::StrCat("host ", name, " is blacklisted: ", why),
             /*now=*/true);
  EndRound(why);
  OpenRound(now);
  const std::string until =
      host->blacklisted_until == absl::InfiniteFuture()
          ? "for the rest of the job"
          : absl::StrCat("for ", Seconds(host->blacklisted_until - now));
  job.Say(absl::StrCat("hvdrun: ", why, "; host ", name, " is blacklisted ",
                       until, ", and the job goes on with ",
                       Count(UsableSlots(), "slot")));
}

void ElasticDriver::CheckEnd(ElasticJobControl& job) {
  const Round* current = Current();
  if (!finishing_ || current == nullptr) return;
  for (const std::string& id : current->members) {
    const Worker& w = workers_[id];
    if (!w.exited && w.leaving.empty()) return;
  }
  ended_ = true;
  job.EndJob(0, "");
}

// ---- Hosts ------------------------------------------------------------------

ElasticDriver::Host* ElasticDriver::HostOfJobIndex(int h, std::string* name) {
  for (auto& [n, host] : hosts_) {
    if (host.job_host == h) {
      if (name != nullptr) *name = n;
      return &host;
    }
  }
  return nullptr;
}

int ElasticDriver::UsableSlots() const {
  int slots = 0;
  for (const auto& [id, w] : workers_) {
    if (!w.exited && w.leaving.empty()) ++slots;
  }
  return slots;
}

void ElasticDriver::AddHost(ElasticJobControl& job, const std::string& name,
                            int slots, absl::Time now) {
  Host& host = hosts_[name];
  std::vector<WorkerSlot> slots_of;
  std::vector<std::string> ids;
  for (int i = 0; i < slots; ++i) {
    WorkerSlot s;
    s.rank = next_worker_++;
    s.local_rank = i;
    s.local_size = slots;
    s.elastic_id = absl::StrCat("w", s.rank);
    ids.push_back(s.elastic_id);
    slots_of.push_back(std::move(s));
  }
  const int h = job.AddHost(name, slots_of);
  host.job_host = h;
  host.active = true;
  host.removed = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    Worker w;
    w.host = name;
    w.job_host = h;
    w.number = slots_of[i].rank;
    workers_[ids[i]] = w;
    if (forming_.has_value()) forming_->expected.insert(ids[i]);
  }
  if (settings_.verbose || !rounds_.empty()) {
    job.Say(absl::StrCat("hvdrun: host ", name, " added with ",
                         Count(slots, "slot")));
  }
  if (absl::Status s = start_agent_(h, name); !s.ok()) {
    FailWorkerHost(job, h,
                   absl::StrCat("host ", name, ": could not start hvd-agent: ",
                                s.message()),
                   now);
  }
}

void ElasticDriver::RemoveHost(ElasticJobControl& job, Host& host,
                               const std::string& why, bool now) {
  host.active = false;
  host.removed = !now;
  for (auto& [id, w] : workers_) {
    if (w.job_host == host.job_host && w.leaving.empty()) w.leaving = why;
  }
  if (now) job.RemoveHost(host.job_host, why);
}

void ElasticDriver::ShutDownEmptyHosts(ElasticJobControl& job) {
  for (auto& [name, host] : hosts_) {
    if (!host.removed) continue;
    bool all_exited = true;
    for (const auto& [id, w] : workers_) {
      if (w.job_host == host.job_host && !w.exited) all_exited = false;
    }
    if (!all_exited) continue;
    host.removed = false;
    job.RemoveHost(host.job_host, absl::StrCat("host ", name,
                                               " left host discovery"));
  }
}

void ElasticDriver::ApplyDiscovery(ElasticJobControl& job, absl::Time now) {
  HostDiscovery::View view = discovery_->Latest();
  if (!view.last_error.empty()) {
    if (now - view.last_success > settings_.timeout) {
      ended_ = true;
      job.EndJob(1, absl::StrCat("hvdrun: host discovery has failed for ",
                                 Seconds(now - view.last_success),
                                 " (--elastic-timeout): ", view.last_error));
      return;
    }
    if (view.last_error != said_discovery_error_) {
      job.Say(absl::StrCat("hvdrun: host discovery failed (hvdrun retries "
                           "every second): ", view.last_error));
    }
  }
  said_discovery_error_ = view.last_error;
  if (finishing_) return;
  bool added = false, removed = false;
  std::set<std::string> listed;
  for (const HostSlots& h : view.hosts) listed.insert(h.name);
  for (auto& [name, host] : hosts_) {
    if (host.active && listed.count(name) == 0) {
      RemoveHost(job, host, absl::StrCat("host ", name,
                                         " left host discovery"),
                 /*now=*/false);
      removed = true;
    }
  }
  int room = settings_.max_np > 0 ? settings_.max_np - UsableSlots() : 1 << 30;
  for (const HostSlots& h : view.hosts) {
    Host& host = hosts_[h.name];
    if (host.active || now < host.blacklisted_until || room <= 0) continue;
    const int slots = std::min(h.slots, room);
    host.slots = slots;
    AddHost(job, h.name, slots, now);
    room -= slots;
    added = true;
  }
  if ((added || removed) && !rounds_.empty()) {
    Announce(added, removed);
    OpenRound(now);
  } else if (rounds_.empty()) {
    OpenRound(now);
  }
}

void ElasticDriver::CheckLimits(ElasticJobControl& job, absl::Time now) {
  if (!forming_.has_value()) {
    short_since_ = absl::InfiniteFuture();
    return;
  }
  const int need = rounds_.empty() ? settings_.np : settings_.min_np;
  const int usable = UsableSlots();
  if (usable >= need) {
    short_since_ = absl::InfiniteFuture();
    said_waiting_ = false;
    return;
  }
  bool any_usable = false;
  std::vector<std::string> blacklisted;
  for (const auto& [name, host] : hosts_) {
    if (host.active || now >= host.blacklisted_until) any_usable = true;
    if (!host.active && now < host.blacklisted_until) blacklisted.push_back(name);
  }
  if (!any_usable && !hosts_.empty() && !rounds_.empty()) {
    ended_ = true;
    job.EndJob(last_failure_code_,
               absl::StrCat("hvdrun: every host is blacklisted (",
                            absl::StrJoin(blacklisted, ", "),
                            "): the job cannot go on"));
    return;
  }
  if (short_since_ == absl::InfiniteFuture()) short_since_ = now;
  if (!said_waiting_) {
    said_waiting_ = true;
    job.Say(absl::StrCat("hvdrun: waiting for hosts: ", Count(usable, "slot"),
                         ", ",
                         need, " needed (--elastic-timeout ",
                         Seconds(settings_.timeout), ")"));
  }
  if (now - short_since_ > settings_.timeout) {
    ended_ = true;
    job.EndJob(rounds_.empty() ? 1 : last_failure_code_,
               absl::StrCat("hvdrun: only ", Count(usable, "slot"), " for ",
                            Seconds(settings_.timeout),
                            " (--elastic-timeout), fewer than the ", need,
                            rounds_.empty() ? " to start with (-np)"
                                            : " needed (--min-np)"));
  }
}

}  // namespace launcher
}  // namespace hvd
