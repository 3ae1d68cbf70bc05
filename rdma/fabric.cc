#include "rdma/fabric.h"

#include <glob.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rdma/libfabric.h"

namespace hvd::rdma {
namespace {

constexpr uint32_t kFiVersion = FI_VERSION(1, 17);

// The hints of fabric.h; `provider` may be empty.
fi_info* Hints(const LibfabricApi& fi, const std::string& provider) {
  fi_info* hints = fi.dupinfo(nullptr);  // fi_allocinfo()
  hints->caps = FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
  hints->domain_attr->threading = FI_THREAD_SAFE;
  hints->domain_attr->av_type = FI_AV_TABLE;
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
  return hints;
}

// The core provider of a layered name: "tcp" for "tcp;ofi_rxm".
std::string CoreName(const char* name) {
  std::string s = name;
  return s.substr(0, s.find(';'));
}

// Providers matching the hints with at least 4 bytes of remote CQ data
// (verbs' immediate data; the sender's rank and the message's sequence).
std::vector<fi_info*> Matches(fi_info* list) {
  std::vector<fi_info*> out;
  for (fi_info* i = list; i != nullptr; i = i->next) {
    if (i->domain_attr->cq_data_size >= 4) out.push_back(i);
  }
  return out;
}

}  // namespace

std::string FiErrorText(int errnum) {
  absl::StatusOr<const LibfabricApi*> fi = Libfabric();
  if (!fi.ok()) return absl::StrCat("libfabric error ", errnum);
  return (*fi)->strerror(errnum);
}

std::string FiError(const char* call, long code) {
  return absl::StrCat(call, " failed: ", FiErrorText(static_cast<int>(-code)));
}

bool IsHardwareProvider(const std::string& provider) {
  static const char* const kHardware[] = {"verbs", "efa", "psm2", "psm3",
                                          "opx", "cxi", "usnic"};
  const std::string core = CoreName(provider.c_str());
  return std::any_of(std::begin(kHardware), std::end(kHardware),
                     [&](const char* h) { return core == h; });
}

bool HasRdmaDevices() {
  for (const char* pattern :
       {"/sys/class/infiniband/*", "/dev/hfi1_*", "/dev/cxi*"}) {
    glob_t found = {};
    const bool any = glob(pattern, 0, nullptr, &found) == 0 &&
                     found.gl_pathc > 0;
    globfree(&found);
    if (any) return true;
  }
  return false;
}

std::string HardwareProvider(const std::string& wanted,
                             const std::vector<std::string>& usable) {
  for (const std::string& name : usable) {
    if ((wanted.empty() || name == wanted) && IsHardwareProvider(name)) {
      return name;
    }
  }
  return "";
}

std::vector<std::string> UsableProviders() {
  std::vector<std::string> names;
  absl::StatusOr<const LibfabricApi*> loaded = Libfabric();
  if (!loaded.ok()) return names;
  const LibfabricApi& fi = **loaded;
  fi_info* hints = Hints(fi, "");
  fi_info* list = nullptr;
  if (fi.getinfo(kFiVersion, nullptr, nullptr, 0, hints, &list) == 0) {
    for (fi_info* i : Matches(list)) {
      std::string name = CoreName(i->fabric_attr->prov_name);
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        names.push_back(name);
      }
    }
  }
  fi.freeinfo(list);
  fi.freeinfo(hints);
  return names;
}

absl::StatusOr<std::string> ResolveProvider(const std::string& provider) {
  if (absl::Status loaded = Libfabric().status(); !loaded.ok()) return loaded;
  const std::vector<std::string> usable = UsableProviders();
  for (const std::string& name : usable) {
    if (provider.empty() || name == provider) return name;
  }
  return absl::NotFoundError(absl::StrCat(
      "no libfabric provider ",
      provider.empty() ? std::string("of any name")
                       : absl::StrCat("named '", provider, "'"),
      " offers RMA writes with remote CQ data on a reliable (FI_EP_RDM) "
      "endpoint (usable here: ",
      usable.empty() ? "none" : absl::StrJoin(usable, ", "), ")"));
}

absl::StatusOr<std::unique_ptr<Fabric>> Fabric::Open(
    const std::string& provider, size_t cq_entries) {
  absl::StatusOr<const LibfabricApi*> loaded = Libfabric();
  if (!loaded.ok()) return loaded.status();
  const LibfabricApi& fi = **loaded;
  std::unique_ptr<Fabric> fabric(new Fabric(fi));
  fi_info* hints = Hints(fi, provider);
  fi_info* list = nullptr;
  const int rc = fi.getinfo(kFiVersion, nullptr, nullptr, 0, hints, &list);
  fi.freeinfo(hints);
  if (rc != 0 || Matches(list).empty()) {
    fi.freeinfo(list);
    auto resolved = ResolveProvider(provider);
    return resolved.ok() ? absl::UnavailableError(FiError("fi_getinfo", rc))
                         : resolved.status();
  }
  fabric->info_ = fi.dupinfo(Matches(list).front());
  fi.freeinfo(list);
  if (absl::Status s = fabric->OpenAll(cq_entries); !s.ok()) return s;
  return fabric;
}

absl::Status Fabric::OpenAll(size_t cq_entries) {
  auto fail = [](const char* call, int rc) {
    return absl::UnavailableError(FiError(call, rc));
  };
  if (int rc = fi_.fabric(info_->fabric_attr, &fabric_, nullptr))
    return fail("fi_fabric", rc);
  if (int rc = fi_domain(fabric_, info_, &domain_, nullptr))
    return fail("fi_domain", rc);
  if (absl::Status s = CheckRegistrationMode(); !s.ok()) return s;
  fi_cq_attr cq_attr = {};
  cq_attr.format = FI_CQ_FORMAT_DATA;
  cq_attr.size = cq_entries;
  cq_attr.wait_obj = FI_WAIT_UNSPEC;
  cq_waitable_ = fi_cq_open(domain_, &cq_attr, &cq_, nullptr) == 0;
  if (!cq_waitable_) {
    cq_attr.wait_obj = FI_WAIT_NONE;
    if (int rc = fi_cq_open(domain_, &cq_attr, &cq_, nullptr))
      return fail("fi_cq_open", rc);
  }
  fi_av_attr av_attr = {};
  av_attr.type = FI_AV_TABLE;
  if (int rc = fi_av_open(domain_, &av_attr, &av_, nullptr))
    return fail("fi_av_open", rc);
  if (int rc = fi_endpoint(domain_, info_, &ep_, nullptr))
    return fail("fi_endpoint", rc);
  if (int rc = fi_ep_bind(ep_, &av_->fid, 0)) return fail("fi_ep_bind av", rc);
  if (int rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV))
    return fail("fi_ep_bind cq", rc);
  if (int rc = fi_enable(ep_)) return fail("fi_enable", rc);
  return absl::OkStatus();
}

absl::Status Fabric::CheckRegistrationMode() {
  if (prov_key()) return absl::OkStatus();
  // A domain that reported no FI_MR_PROV_KEY must keep the key it is asked
  // for. One that picks its own is running libfabric's 1.0 semantics
  // (virtual addresses, provider keys) behind an fi_info that says
  // otherwise, as a program whose fi_* references were bound to the
  // library's 1.0 ABI once did (libfabric.h binds the 1.17 versions).
  static char probe[64];
  constexpr uint64_t kProbeKey = uint64_t{1} << 41;
  fid_mr* mr = nullptr;
  if (int rc = fi_mr_reg(domain_, probe, sizeof(probe), FI_REMOTE_WRITE, 0,
                         kProbeKey, 0, &mr, nullptr)) {
    return absl::UnavailableError(FiError("fi_mr_reg (probe)", rc));
  }
  const uint64_t key = fi_mr_key(mr);
  fi_close(&mr->fid);
  if (key == kProbeKey) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "libfabric's ", provider_name(), " domain chose memory registration key ",
      key, " although fi_getinfo reported no FI_MR_PROV_KEY (asked for ",
      kProbeKey,
      "): the domain behaves as libfabric's 1.0 ABI does, whose domains "
      "address remote writes differently; this libfabric is not one the "
      "transport can use (libfabric 1.17's versioned fi_getinfo and "
      "fi_fabric are bound)"));
}

void Fabric::CloseEndpoint() {
  if (ep_ != nullptr) fi_close(&ep_->fid);
  ep_ = nullptr;
}

Fabric::~Fabric() {
  CloseEndpoint();
  if (av_ != nullptr) fi_close(&av_->fid);
  if (cq_ != nullptr) fi_close(&cq_->fid);
  if (domain_ != nullptr) fi_close(&domain_->fid);
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  if (info_ != nullptr) fi_.freeinfo(info_);
}

std::string Fabric::provider_name() const {
  return info_->fabric_attr->prov_name;
}

std::string Fabric::endpoint_name() const {
  std::string name(256, '\0');
  size_t len = name.size();
  if (fi_getname(&ep_->fid, name.data(), &len) != 0) return "";
  name.resize(len);
  return name;
}

std::string Fabric::AddressString(const std::string& name) const {
  char buf[256];
  size_t len = sizeof(buf);
  fi_av_straddr(av_, name.data(), buf, &len);
  return std::string(buf, strnlen(buf, sizeof(buf)));
}

bool Fabric::mr_local() const {
  return (info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0 ||
         (info_->mode & FI_LOCAL_MR) != 0;
}
bool Fabric::virt_addr() const {
  // Without FI_MR_VIRT_ADDR (tcp;ofi_rxm and sockets report none of the
  // offered bits) a remote address is an offset into the region.
  return (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
}
bool Fabric::prov_key() const {
  return (info_->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
}

bool Fabric::ordered_writes(size_t bytes) const {
  return (info_->tx_attr->msg_order & FI_ORDER_WAW) != 0 &&
         info_->ep_attr->max_order_waw_size >= bytes;
}

}  // namespace hvd::rdma
