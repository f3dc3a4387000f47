// Builds of fused-chain kernels off the calling thread. Where a chain's
// calls can run unfused at full speed while its kernel builds (host memory:
// ATen's CPU kernels), a cold chain does not wait for the C++ compiler
// (~0.5-1 s a kernel, 7-14 s on a model's first step): it runs call by call
// until its kernel is ready, then fused. One worker thread, started with the
// first build; at exit, builds not yet started are dropped (the persistent
// cache holds those that finished) and the running one is waited for.
#pragma once

#include <cstdint>
#include <functional>

namespace openneuron::integration {

// Queues `build` for the worker thread. `build` must not throw.
void build_in_background(std::function<void()> build);

// Builds queued or running.
int64_t background_builds_pending();

// Waits until no build is queued or running.
void wait_for_background_builds();

// At exit, before anything a build uses is torn down (Python's atexit:
// C++'s would run after the statics a first build created are destroyed):
// drops the builds not started, waits for the running one, takes no more.
void stop_background_builds();

}  // namespace openneuron::integration
