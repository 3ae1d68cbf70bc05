// libfabric resources of one context: provider choice, then fabric, domain,
// completion queue, address vector and one reliable-datagram endpoint, owned
// together and closed in reverse order.
//
// Provider choice: the hints ask for FI_MSG | FI_RMA on an FI_EP_RDM
// endpoint with remote CQ data, thread-safe domain, and offer the memory
// registration modes verbs needs (FI_MR_LOCAL, FI_MR_VIRT_ADDR,
// FI_MR_PROV_KEY, FI_MR_ALLOCATED) and FI_CONTEXT/FI_CONTEXT2 and
// FI_RX_CQ_DATA, so whatever the chosen provider demands of those, the code
// does (local descriptors, provider keys, virtual or offset addressing,
// receive buffers consumed by remote CQ data).
#ifndef HVD_RDMA_FABRIC_H_
#define HVD_RDMA_FABRIC_H_

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rdma/libfabric.h"

namespace hvd::rdma {

// Providers whose fabric is hardware (kernel-bypass NICs); the others
// (tcp, sockets, udp, net, shm) emulate the API in software.
bool IsHardwareProvider(const std::string& provider);

// Whether this host shows a device some hardware provider drives: an RDMA
// device (verbs, efa, psm3, usnic: /sys/class/infiniband), an Omni-Path HFI
// (psm2, opx: /dev/hfi1_*) or a Slingshot NIC (cxi: /dev/cxi*). Cheap, where
// a first libfabric query loads every provider (about 0.1 s here): where
// this is false, no hardware provider is usable.
bool HasRdmaDevices();

// The first of `usable` (UsableProviders' names) that is a hardware provider
// and, unless `wanted` is empty, is named `wanted`; "" when none is: what
// HVD_TRANSPORT=auto takes, since no software provider beats hvd's own TCP.
std::string HardwareProvider(const std::string& wanted,
                             const std::vector<std::string>& usable);

// Names of the providers that pass the hints above, first match first,
// without duplicates ("tcp;ofi_rxm" is reported as "tcp"); none where
// libfabric cannot be loaded.
std::vector<std::string> UsableProviders();

// The first provider passing the hints whose name is `provider` (any, if
// empty). NotFound naming what was looked for and what exists otherwise;
// FailedPrecondition where libfabric cannot be loaded (Libfabric()).
absl::StatusOr<std::string> ResolveProvider(const std::string& provider);

class Fabric {
 public:
  // Opens everything for `provider` (a name ResolveProvider accepts) with a
  // completion queue of at least `cq_entries`. Unavailable naming the call
  // that failed.
  static absl::StatusOr<std::unique_ptr<Fabric>> Open(
      const std::string& provider, size_t cq_entries);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  // Closes the endpoint (cancelling what is posted on it); the rest stays
  // until destruction.
  void CloseEndpoint();

  const fi_info* info() const { return info_; }
  fid_domain* domain() const { return domain_; }
  fid_ep* ep() const { return ep_; }
  fid_cq* cq() const { return cq_; }
  fid_av* av() const { return av_; }
  // Whether fi_cq_sread may block (the CQ has a wait object).
  bool cq_waitable() const { return cq_waitable_; }
  // The provider's name ("tcp;ofi_rxm") and this endpoint's address.
  std::string provider_name() const;
  std::string endpoint_name() const;  // raw bytes of fi_getname
  // A readable form of an endpoint name.
  std::string AddressString(const std::string& name) const;
  bool mr_local() const;
  bool virt_addr() const;
  bool prov_key() const;
  // Whether writes of up to `bytes` each land in the order they were posted
  // (FI_ORDER_WAW, max_order_waw_size): the remote completion of the last
  // then implies the earlier ones landed.
  bool ordered_writes(size_t bytes) const;

 private:
  explicit Fabric(const LibfabricApi& fi) : fi_(fi) {}
  absl::Status OpenAll(size_t cq_entries);
  // FailedPrecondition when the domain does not use the registration mode
  // fi_getinfo reported (libfabric bound through its 1.0 ABI).
  absl::Status CheckRegistrationMode();

  const LibfabricApi& fi_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  bool cq_waitable_ = false;
};

// fi_strerror's text for a (positive) libfabric error number.
std::string FiErrorText(int errnum);

// "fi_xxx failed: <fi_strerror>" for a negative libfabric return code.
std::string FiError(const char* call, long code);

}  // namespace hvd::rdma

#endif  // HVD_RDMA_FABRIC_H_
