// Allocator statistics with the meaning of CUDA's caching allocator
// (torch.cuda.memory_stats): every counter has current, peak, allocated
// (cumulative increments) and freed (cumulative decrements), for the small
// pool, the large pool and both together.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace openneuron::hal {

struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;
  int64_t freed = 0;

  void increase(int64_t amount) {
    current += amount;
    peak = current > peak ? current : peak;
    allocated += amount;
  }
  void decrease(int64_t amount) {
    current -= amount;
    freed += amount;
  }
  void reset_peak() { peak = current; }
  void reset_accumulated() { allocated = freed = 0; }
};

enum class Pool : int { All = 0, Small = 1, Large = 2 };
using StatArray = std::array<Stat, 3>;  // indexed by Pool

struct AllocatorStats {
  StatArray allocation;            // COUNT: allocations by client code
  StatArray segment;               // COUNT: segments from Driver::allocate
  StatArray active;                // COUNT: blocks allocated or in use by a stream
  StatArray inactive_split;        // COUNT: free blocks inside split segments
  StatArray allocated_bytes;       // SUM: bytes handed to clients (rounded)
  StatArray reserved_bytes;        // SUM: bytes held from the driver
  StatArray active_bytes;          // SUM: bytes in active blocks
  StatArray inactive_split_bytes;  // SUM: bytes in inactive split blocks
  StatArray requested_bytes;       // SUM: bytes asked for (unrounded)
  int64_t num_alloc_retries = 0;   // driver allocations that failed once and
                                   // succeeded after freeing the cache
  int64_t num_ooms = 0;            // OutOfMemoryError raised
  int64_t num_sync_all_streams = 0;
  int64_t num_device_alloc = 0;
  int64_t num_device_free = 0;
  Stat oversize_allocations;
  Stat oversize_segments;
  int64_t max_split_size = 0;
};

// Updates the All entry and the entry of `pool` together.
inline void update_stat(StatArray& stats, Pool pool, int64_t delta) {
  auto apply = [delta](Stat& stat) {
    if (delta >= 0) {
      stat.increase(delta);
    } else {
      stat.decrease(-delta);
    }
  };
  apply(stats[static_cast<size_t>(Pool::All)]);
  if (pool != Pool::All) apply(stats[static_cast<size_t>(pool)]);
}

}  // namespace openneuron::hal
