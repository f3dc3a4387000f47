// median, nanmedian and kthvalue (with and without a dim), composed from
// device ops on drivers whose memory the host cannot address (they took the
// CPU fallback): a stable ascending sort along the dim (NaN last, ties in
// index order: the order the CPU kernels' comparators define), then each
// line's rank read with gather. The rank is the CPU's: (n - 1) / 2 for
// median, the first NaN where a line has one (torch.median propagates NaN),
// (n - nans - 1) / 2 for nanmedian, k - 1 for kthvalue. A call these do not
// cover (bool: the CPU fallback raises the CPU's error) is left alone; an
// empty line or a k out of range raises the CPU's error here.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing.
bool run_order_statistic_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration
