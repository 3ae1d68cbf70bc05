// What a posted transport operation does; shared by the implementations'
// per-operation state and their error messages.
#ifndef HVD_CORE_TRANSPORT_OP_KIND_H_
#define HVD_CORE_TRANSPORT_OP_KIND_H_

namespace hvd::transport {

enum class OpKind { kSend, kRecv, kRecvAny };

inline const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kSend:
      return "Send";
    case OpKind::kRecv:
      return "Recv";
    case OpKind::kRecvAny:
      return "RecvAny";
  }
  return "?";
}

}  // namespace hvd::transport

#endif  // HVD_CORE_TRANSPORT_OP_KIND_H_
