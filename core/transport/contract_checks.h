// Checks of the transport interface's contract that every transport's tests
// run on contexts of their own kind (tcp, shm, ...), so the transports agree.
#ifndef HVD_CORE_TRANSPORT_CONTRACT_CHECKS_H_
#define HVD_CORE_TRANSPORT_CONTRACT_CHECKS_H_

#include "absl/time/time.h"
#include "core/transport/transport.h"

namespace hvd::transport::testing {

// `sender` sends `receiver` one message of kMaxRecvAnyBytes + 1 bytes: the
// receiver's RecvAny must fail with Internal naming both lengths, without
// reserving the message. Aborts both contexts afterwards.
void ExpectOversizedRecvAnyFails(Context& sender, Context& receiver,
                                 absl::Time deadline);

// `receiver` waits for a Recv from `sender` past a short deadline
// (DeadlineExceeded), then `sender` sends, and the same request waited for
// again completes with the data.
void ExpectAWaitPastItsDeadlineCanBeWaitedForAgain(Context& sender,
                                                   Context& receiver,
                                                   absl::Time deadline);

// Where `receiver` reduces on receive from `sender`, messages of several
// lengths (some past any ring or inline size, some not a multiple of the
// alignment) sent to a RecvReduce arrive whole: pieces in order, each
// starting where the last ended, at a multiple of kReducePieceAlignment,
// covering the message, the reducer released once the request completed.
// Elsewhere RecvReduce fails with Unimplemented and leaves the context
// usable.
void ExpectRecvReduceHandsOverTheMessageOrSaysItCannot(Context& sender,
                                                       Context& receiver,
                                                       absl::Time deadline);

}  // namespace hvd::transport::testing

#endif  // HVD_CORE_TRANSPORT_CONTRACT_CHECKS_H_
