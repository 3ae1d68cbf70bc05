// hvd-agent: started by hvdrun (over ssh, or fork/exec on the submitting
// host) with --launcher-stdin, or by an orchestrator with --rendezvous.
//
// Flags are few and the command after them keeps its own, as in hvdrun
// (launcher/options.cc says why a small hand-written parser).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/agent.h"
#include "agent/reaper.h"
#include "core/common/config_names.h"
#include "core/common/env.h"
#include "core/common/logging.h"
#include "core/rendezvous/tls.h"
#include "host/agent_starter.h"
#include "host/bootstrap.h"
#include "host/launch_tree.h"
#include "host/netif.h"
#include "host/process.h"
#include "core/common/version.h"
#include "proto/job_token.h"

namespace {

constexpr char kUsage[] =
    "usage: hvd-agent --launcher-stdin          (started by hvdrun)\n"
    "       hvd-agent --rendezvous ADDR[,ADDR...] --slots K [--token-file F]\n"
    "                 [--hostname NAME] [--connect-timeout S] [--verbose]\n"
    "                 [command args...]\n"
    "\n"
    "Orchestrator mode joins the job of `hvdrun --rendezvous-only` at ADDR\n"
    "(host:port; of a list, the first that answers) offering K slots; the job token comes from --token-file F\n"
    "(the token alone, or the HVD_JOB_TOKEN= line of hvdrun's\n"
    "--rendezvous-file) or the HVD_JOB_TOKEN variable (never a command-line\n"
    "argument). The\n"
    "command, if given, is what the workers run (otherwise hvdrun's).\n"
    "Exit code: the job's (0 when every worker exited 0), 1 when the\n"
    "launcher is lost or refuses this agent, 2 for bad input.\n";

struct Args {
  bool launcher_stdin = false;
  std::string rendezvous;
  int slots = 0;
  std::string token_file;
  std::string hostname;
  double connect_timeout_s = 60;
  bool verbose = false;
  std::vector<std::string> command;
};

int BadInput(const std::string& message) {
  std::fprintf(stderr, "hvd-agent: %s (see hvd-agent --help)\n",
               message.c_str());
  return 2;
}

// Applies one flag; `value(&v)` fetches its value (after '=', or the next
// argument) and is false when there is none. Returns -1 to go on, else the
// exit code to return (0 after --help and --version).
int ApplyFlag(const std::string& name,
              absl::FunctionRef<bool(std::string*)> value, Args* a) {
  std::string v;
  if (name == "--help" || name == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  } else if (name == "--version") {
    std::printf("hvd-agent %s\n", hvd::kVersion);
    return 0;
  } else if (name == "--launcher-stdin") {
    a->launcher_stdin = true;
  } else if (name == "--verbose") {
    a->verbose = true;
  } else if (name == "--rendezvous") {
    if (!value(&v)) return BadInput("--rendezvous needs a value");
    for (absl::string_view addr : absl::StrSplit(v, ',')) {
      std::string host;
      int port;
      if (!hvd::host::SplitHostPort(addr, &host, &port)) {
        return BadInput(absl::StrCat(
            "--rendezvous '", v, "': expected HOST:PORT[,HOST:PORT...] with "
            "ports from 1 to 65535, as hvdrun --rendezvous-only prints"));
      }
    }
    a->rendezvous = v;
  } else if (name == "--slots") {
    if (!value(&v) || !absl::SimpleAtoi(v, &a->slots) || a->slots <= 0) {
      return BadInput("--slots needs a positive integer");
    }
  } else if (name == "--token-file") {
    if (!value(&v)) return BadInput("--token-file needs a value");
    a->token_file = v;
  } else if (name == "--hostname") {
    if (!value(&v) || v.empty()) return BadInput("--hostname needs a value");
    a->hostname = v;
  } else if (name == "--connect-timeout") {
    if (!value(&v) || !absl::SimpleAtod(v, &a->connect_timeout_s) ||
        !(a->connect_timeout_s > 0)) {
      return BadInput("--connect-timeout needs a positive number of seconds");
    }
  } else {
    return BadInput(absl::StrCat("unknown flag '", name, "'"));
  }
  return -1;
}

// Returns -1 when parsing succeeded, else the exit code to return.
int Parse(int argc, char** argv, Args* a) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;
    std::string name = arg;
    std::optional<std::string> given;  // "--flag=value"
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      given = arg.substr(eq + 1);
    }
    auto value = [&](std::string* out) {
      if (given.has_value()) {
        *out = *given;
        return true;
      }
      // A flag is not a value: "--hostname --slots 2" lacks the name.
      if (i + 1 >= argc || absl::StartsWith(argv[i + 1], "--")) return false;
      *out = argv[++i];
      return true;
    };
    if (int rc = ApplyFlag(name, value, a); rc >= 0) return rc;
  }
  for (; i < argc; ++i) a->command.emplace_back(argv[i]);
  if (a->launcher_stdin == !a->rendezvous.empty()) {
    return BadInput("give exactly one of --launcher-stdin and --rendezvous");
  }
  if (!a->rendezvous.empty() && a->slots == 0) {
    return BadInput("--rendezvous needs --slots");
  }
  return -1;
}

// Token of an orchestrated agent: --token-file, else $HVD_JOB_TOKEN (or
// $HOROVOD_JOB_TOKEN).
int ReadToken(const Args& a, std::string* token) {
  if (!a.token_file.empty()) {
    std::ifstream in(a.token_file);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in) return BadInput(absl::StrCat("cannot read --token-file '",
                                          a.token_file, "'"));
    // A bare token, or the file `hvdrun --rendezvous-file` writes.
    *token = std::string(absl::StripAsciiWhitespace(ss.str()));
    for (absl::string_view line : absl::StrSplit(ss.str(), '\n')) {
      if (absl::ConsumePrefix(&line, "HVD_JOB_TOKEN=")) {
        *token = std::string(absl::StripAsciiWhitespace(line));
      }
    }
  } else if (auto t = hvd::GetConfig(hvd::config_names::kJobToken)) {
    *token = *t;
  }
  if (token->empty()) {
    return BadInput("no job token: give --token-file or set HVD_JOB_TOKEN");
  }
  absl::Status s = hvd::rendezvous::ValidateJobToken(*token);
  if (!s.ok()) return BadInput(std::string(s.message()));
  return -1;
}

// Started by hvdrun: everything comes from the bootstrap on stdin, kept in
// `bootstrap` (it names the hosts below this one in a launch tree).
// Returns -1, or the exit code when it cannot be read.
int OptionsFromLauncher(Args* args, hvd::agent::AgentOptions* options,
                        hvd::host::Bootstrap* bootstrap) {
  absl::StatusOr<hvd::host::Bootstrap> b =
      hvd::host::ReadBootstrap(0, absl::Seconds(30));
  if (!b.ok()) {
    std::fprintf(stderr, "hvd-agent: %s\n",
                 std::string(b.status().message()).c_str());
    return 2;
  }
  *bootstrap = *b;
  options->rendezvous = b->rendezvous;
  options->token = b->token;
  options->tls = {b->tls_ca_pem, b->tls_name};
  options->host_index = b->host_index;
  options->hostname = b->host_name;
  options->connect_timeout = b->connect_timeout;
  options->launcher_fd = 0;  // its end means hvdrun (or its ssh) is gone
  options->probe_listener = b->probe;
  args->verbose = args->verbose || b->verbose;
  return -1;
}

// Started by an orchestrator: flags, and the token from a file or the
// environment. Returns -1, or the exit code for bad input.
int OptionsFromFlags(const Args& args, hvd::agent::AgentOptions* options) {
  if (int rc = ReadToken(args, &options->token); rc >= 0) return rc;
  // TLS: the CA of the rendezvous' certificate, passed on to the workers.
  if (auto ca = hvd::GetConfig(hvd::config_names::kRendezvousCa)) {
    absl::StatusOr<std::string> pem = hvd::rendezvous::PemOrFile(*ca);
    if (!pem.ok()) {
      return BadInput(absl::StrCat("HVD_RENDEZVOUS_CA: ", pem.status().message()));
    }
    options->tls.ca_pem = *std::move(pem);
  }
  if (auto name = hvd::GetConfig(hvd::config_names::kRendezvousTlsName)) {
    options->tls.server_name = *name;
  }
  // A list is tried in order (hvdrun prints all its addresses).
  options->rendezvous =
      absl::StrSplit(args.rendezvous, ',', absl::SkipEmpty());
  options->slots = args.slots;
  options->hostname = args.hostname;
  options->command = args.command;
  options->connect_timeout = absl::Seconds(args.connect_timeout_s);
  return -1;
}

// A launch tree: starts the agents of the hosts right below this one, each
// told of the hosts below it, over ssh as hvdrun would, and reports each
// one's end to hvdrun through `agent`. Null when this host is a leaf. Runs
// on the main thread, which outlives them (they get SIGTERM when the
// thread that started them ends).
std::unique_ptr<hvd::host::AgentStarter> StartAgentsBelow(
    const hvd::host::Bootstrap& mine, bool verbose, hvd::agent::Agent* agent) {
  if (mine.below.empty()) return nullptr;
  hvd::host::AgentStarterOptions o;
  o.remote_agent = mine.agent_path;
  if (mine.ssh_port > 0) o.ssh_port = mine.ssh_port;
  o.ssh_identity_file = mine.ssh_identity_file;
  o.ssh_config_file = mine.ssh_config_file;
  o.connect_timeout = mine.connect_timeout;
  std::map<int, std::string> names;
  for (const hvd::host::Bootstrap::Below& h : mine.below) {
    names[h.index] = h.name;
  }
  auto starter = std::make_unique<hvd::host::AgentStarter>(
      o, hvd::host::RealOs(),
      [agent](int host, std::string why) {
        agent->ReportAgentEnded(host, std::move(why));
      },
      [verbose, names, me = mine.host_name](int host, std::string line) {
        if (!verbose) return;
        std::fprintf(stderr, "hvd-agent %s: [agent of %s] %s\n", me.c_str(),
                     names.at(host).c_str(), line.c_str());
      });
  for (const hvd::host::Bootstrap::Below& child : mine.below) {
    if (child.parent != mine.host_index) continue;
    hvd::host::Bootstrap theirs = mine;
    theirs.host_index = child.index;
    theirs.host_name = child.name;
    theirs.below = hvd::host::Subtree(mine.below, child.index);
    HVD_LOG(INFO) << "hvd-agent " << mine.host_name
                  << ": starting the agent of " << child.name << " ("
                  << theirs.below.size() << " hosts below it)";
    absl::Status s = starter->Start(child.index, child.name, false, theirs);
    if (!s.ok()) agent->ReportAgentEnded(child.index, std::string(s.message()));
  }
  return starter;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  Args args;
  if (int rc = Parse(argc, argv, &args); rc >= 0) return rc;

  hvd::agent::AgentOptions options;
  hvd::host::Bootstrap bootstrap;
  if (int rc = args.launcher_stdin
                   ? OptionsFromLauncher(&args, &options, &bootstrap)
                   : OptionsFromFlags(args, &options);
      rc >= 0) {
    return rc;
  }
  // HVD_LOG_LEVEL of the agent's own environment, unless --verbose.
  if (args.verbose) {
    hvd::SetLogLevel(hvd::LogLevel::kDebug);
  } else if (auto text = hvd::GetConfig(hvd::config_names::kLogLevel)) {
    hvd::LogLevel level;
    if (hvd::ParseLogLevel(*text, &level)) hvd::SetLogLevel(level);
  }

  // The reaper is forked while this process still has one thread.
  absl::StatusOr<std::unique_ptr<hvd::agent::Reaper>> reaper =
      hvd::agent::Reaper::Start(hvd::host::RealOs(), absl::Seconds(3));
  if (!reaper.ok()) {
    std::fprintf(stderr, "hvd-agent: %s\n",
                 std::string(reaper.status().message()).c_str());
    return 1;
  }

  // Termination signals go to one thread that tells the agent; every other
  // thread (gRPC's included) inherits the blocked mask.
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  // Never destroyed: the signal thread may still refer to it; _exit below.
  auto* agent =
      new hvd::agent::Agent(options, hvd::host::RealOs(), reaper->get());
  std::thread([agent, set] {
    int sig;
    while (sigwait(&set, &sig) == 0) agent->Signal(sig);
  }).detach();
  std::unique_ptr<hvd::host::AgentStarter> below =
      StartAgentsBelow(bootstrap, args.verbose, agent);
  int code = agent->Run();
  // Their stdin closed: those still running end their workers and exit.
  below.reset();
  reaper->reset();  // nothing tracked is left; waits for the reaper to exit
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}
