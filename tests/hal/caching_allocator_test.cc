// The caching allocator: size classes, caching, splitting and coalescing,
// stream-ordered reuse, statistics and out-of-memory behaviour. Each test
// uses its own host driver and a small capacity, so numbers are exact.
#include "hal/caching_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hal/drivers/host/host_driver.h"
#include "hal/error.h"
#include "test_util.h"

namespace openneuron::hal {
namespace {

using namespace std::chrono_literals;
using test_util::Gate;

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr auto kAll = static_cast<size_t>(Pool::All);
constexpr auto kSmall = static_cast<size_t>(Pool::Small);
constexpr auto kLarge = static_cast<size_t>(Pool::Large);

class CachingAllocatorTest : public ::testing::Test {
 protected:
  static constexpr size_t kDriverCapacity = 1024 * kMiB;

  CachingAllocator& make(size_t capacity = 256 * kMiB) {
    allocator_ = std::make_unique<CachingAllocator>(driver_, 0, capacity);
    return *allocator_;
  }

  // The segment that contains `ptr`.
  static const SegmentSnapshot* segment_of(
      const std::vector<SegmentSnapshot>& segments, const void* ptr) {
    auto address = reinterpret_cast<uintptr_t>(ptr);
    for (const auto& s : segments) {
      if (address >= s.address && address < s.address + s.total_size) return &s;
    }
    return nullptr;
  }

  HostDriver driver_{2, kDriverCapacity};
  std::unique_ptr<CachingAllocator> allocator_;
};

TEST_F(CachingAllocatorTest, ZeroBytesAndNullPointer) {
  auto& a = make();
  EXPECT_EQ(a.allocate(0, nullptr), nullptr);
  EXPECT_NO_THROW(a.free(nullptr));
  EXPECT_EQ(a.stats().num_device_alloc, 0);
}

TEST_F(CachingAllocatorTest, FreeOfUnknownPointerThrows) {
  auto& a = make();
  int local = 0;
  EXPECT_THROW(a.free(&local), InvalidArgumentError);
  void* p = a.allocate(1000, nullptr);
  EXPECT_THROW(a.free(static_cast<char*>(p) + 512), InvalidArgumentError);
  a.free(p);
  EXPECT_THROW(a.free(p), InvalidArgumentError) << "double free";
  EXPECT_THROW(a.record_stream(&local, nullptr), InvalidArgumentError);
}

TEST_F(CachingAllocatorTest, RoundsTo512Bytes) {
  auto& a = make();
  void* p1 = a.allocate(1, nullptr);
  void* p2 = a.allocate(513, nullptr);
  void* p3 = a.allocate(4096, nullptr);
  EXPECT_EQ(a.allocation_size(p1), 512u);
  EXPECT_EQ(a.allocation_size(p2), 1024u);
  EXPECT_EQ(a.allocation_size(p3), 4096u);
  EXPECT_EQ(a.allocation_size(static_cast<char*>(p2) + 700), 1024u)
      << "interior pointers find their allocation";
  auto s = a.stats();
  EXPECT_EQ(s.allocated_bytes[kAll].current, 512 + 1024 + 4096);
  EXPECT_EQ(s.requested_bytes[kAll].current, 1 + 513 + 4096);
  EXPECT_TRUE(a.owns(p1));
  EXPECT_FALSE(a.owns(nullptr));
  a.free(p1);
  EXPECT_FALSE(a.owns(p1));
  EXPECT_EQ(a.allocation_size(p1), 0u);
  a.free(p2);
  a.free(p3);
}

TEST_F(CachingAllocatorTest, SmallAndLargePools) {
  auto& a = make();
  void* small = a.allocate(1000, nullptr);
  void* edge = a.allocate(kMiB, nullptr);  // still small
  // Its own segment, in 2 MiB steps; allocated before `mid`, which would
  // otherwise serve it from its 20 MiB segment.
  void* big = a.allocate(11 * kMiB + 1, nullptr);
  void* mid = a.allocate(kMiB + 1, nullptr);  // large, 20 MiB segment
  auto segments = a.snapshot();
  ASSERT_EQ(segments.size(), 3u);
  const auto* s_small = segment_of(segments, small);
  ASSERT_NE(s_small, nullptr);
  EXPECT_EQ(s_small, segment_of(segments, edge)) << "both fit in 2 MiB";
  EXPECT_FALSE(s_small->is_large);
  EXPECT_EQ(s_small->total_size, 2 * kMiB);
  const auto* s_mid = segment_of(segments, mid);
  ASSERT_NE(s_mid, nullptr);
  EXPECT_TRUE(s_mid->is_large);
  EXPECT_EQ(s_mid->total_size, 20 * kMiB);
  const auto* s_big = segment_of(segments, big);
  ASSERT_NE(s_big, nullptr);
  EXPECT_TRUE(s_big->is_large);
  EXPECT_EQ(s_big->total_size, 12 * kMiB);

  auto s = a.stats();
  EXPECT_EQ(s.segment[kSmall].current, 1);
  EXPECT_EQ(s.segment[kLarge].current, 2);
  EXPECT_EQ(s.segment[kAll].current, 3);
  EXPECT_EQ(s.reserved_bytes[kSmall].current, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(s.reserved_bytes[kLarge].current, static_cast<int64_t>(32 * kMiB));
  EXPECT_EQ(s.allocation[kSmall].current, 2);
  EXPECT_EQ(s.allocation[kLarge].current, 2);
  EXPECT_EQ(driver_.used_memory(0), 34 * kMiB);
  for (void* p : {small, edge, mid, big}) a.free(p);
}

TEST_F(CachingAllocatorTest, ReusesFreedBlock) {
  auto& a = make();
  void* p = a.allocate(4096, nullptr);
  a.free(p);
  void* q = a.allocate(4000, nullptr);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().num_device_alloc, 1);
  a.free(q);
  EXPECT_EQ(a.stats().reserved_bytes[kAll].current,
            static_cast<int64_t>(2 * kMiB))
      << "freed memory stays cached";
}

TEST_F(CachingAllocatorTest, BestFitPicksSmallestBlock) {
  auto& a = make();
  // Three blocks separated by live ones, so they cannot coalesce.
  void* big = a.allocate(64 * kKiB, nullptr);
  void* sep1 = a.allocate(512, nullptr);
  void* fit = a.allocate(8 * kKiB, nullptr);
  void* sep2 = a.allocate(512, nullptr);
  a.free(big);
  a.free(fit);
  EXPECT_EQ(a.allocate(6 * kKiB, nullptr), fit);
  a.free(fit);
  a.free(sep1);
  a.free(sep2);
}

// A freed small block is parked for the next request of its size (the
// free/allocate pattern of every eager op), yet statistics and snapshots read
// as if it had merged back at once, and other sizes still get the best fit.
TEST_F(CachingAllocatorTest, ParkedBlocksAreReusedAndInvisible) {
  auto& a = make();
  auto qa = driver_.create_queue(0, 0);
  auto qb = driver_.create_queue(0, 0);
  void* keep = a.allocate(512, qa.get());
  void* p = a.allocate(1024, qa.get());
  a.free(p);
  EXPECT_EQ(a.allocate(1024, qa.get()), p) << "same size and queue: reused";
  a.free(p);
  EXPECT_NE(a.allocate(1024, qb.get()), p) << "another queue never takes it";

  // Read while parked: merged, as CUDA's allocator reports.
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.active[kAll].current, 2);  // keep + qb's block
  EXPECT_EQ(s.active_bytes[kAll].current, 512 + 1024);
  EXPECT_EQ(s.inactive_split[kAll].current, 2);  // one free tail per segment
  EXPECT_EQ(s.inactive_split_bytes[kAll].current,
            static_cast<int64_t>(2 * 2 * kMiB - 512 - 1024));
  auto blocks = segment_of(a.snapshot(), keep)->blocks;
  ASSERT_EQ(blocks.size(), 2u) << "the freed block merged with the tail";

  // A smaller request takes the best fit, parked blocks included.
  void* big = a.allocate(64 * kKiB, qa.get());
  void* sep = a.allocate(512, qa.get());
  void* fit = a.allocate(8 * kKiB, qa.get());
  void* sep2 = a.allocate(512, qa.get());
  a.free(big);
  a.free(fit);  // parked
  EXPECT_EQ(a.allocate(6 * kKiB, qa.get()), fit);

  // empty_cache also returns segments whose blocks were parked.
  for (void* ptr : {keep, sep, sep2, fit}) a.free(ptr);
  a.empty_cache();
  s = a.stats();
  EXPECT_EQ(s.reserved_bytes[kAll].current, static_cast<int64_t>(2 * kMiB))
      << "only qb's segment (one live block) is left";
  EXPECT_EQ(s.inactive_split[kAll].current, 1);
}

TEST_F(CachingAllocatorTest, BlocksAreNotSharedAcrossQueues) {
  auto& a = make();
  auto qa = driver_.create_queue(0, 0);
  auto qb = driver_.create_queue(0, 0);
  void* p = a.allocate(4096, qa.get());
  a.free(p);
  void* q = a.allocate(4096, qb.get());
  EXPECT_NE(q, p);
  EXPECT_EQ(a.stats().num_device_alloc, 2);
  auto segments = a.snapshot();
  EXPECT_EQ(segment_of(segments, p)->queue, qa.get());
  EXPECT_EQ(segment_of(segments, q)->queue, qb.get());
  EXPECT_EQ(a.allocate(4096, qa.get()), p) << "same queue reuses";
  a.free(p);
  a.free(q);
}

TEST_F(CachingAllocatorTest, SplitsAndCoalesces) {
  auto& a = make();
  void* x = a.allocate(1024, nullptr);
  void* y = a.allocate(1024, nullptr);
  void* z = a.allocate(1024, nullptr);
  EXPECT_EQ(static_cast<char*>(y), static_cast<char*>(x) + 1024);
  EXPECT_EQ(static_cast<char*>(z), static_cast<char*>(y) + 1024);
  auto blocks = a.snapshot().at(0).blocks;
  ASSERT_EQ(blocks.size(), 4u);  // x, y, z, free tail
  EXPECT_FALSE(blocks[3].allocated);
  EXPECT_EQ(blocks[3].size, 2 * kMiB - 3 * 1024);
  auto s = a.stats();
  EXPECT_EQ(s.inactive_split[kAll].current, 1);
  EXPECT_EQ(s.inactive_split_bytes[kAll].current,
            static_cast<int64_t>(2 * kMiB - 3 * 1024));

  a.free(y);  // a hole between x and z
  s = a.stats();
  EXPECT_EQ(s.inactive_split[kAll].current, 2);
  EXPECT_EQ(s.inactive_split_bytes[kAll].current,
            static_cast<int64_t>(2 * kMiB - 2 * 1024));
  EXPECT_EQ(a.snapshot().at(0).blocks.size(), 4u);

  a.free(x);  // merges with y
  blocks = a.snapshot().at(0).blocks;
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].size, 2048u);
  EXPECT_FALSE(blocks[0].allocated);
  EXPECT_EQ(a.stats().inactive_split[kAll].current, 2);

  a.free(z);  // merges with both neighbours: the segment is whole again
  blocks = a.snapshot().at(0).blocks;
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].size, 2 * kMiB);
  s = a.stats();
  EXPECT_EQ(s.inactive_split[kAll].current, 0);
  EXPECT_EQ(s.inactive_split_bytes[kAll].current, 0);
  EXPECT_EQ(s.active[kAll].current, 0);
}

TEST_F(CachingAllocatorTest, LargeBlocksSplitOnlyAboveOneMiB) {
  auto& a = make();
  void* p = a.allocate(9 * kMiB, nullptr);  // 20 MiB segment, 11 MiB tail
  auto segments = a.snapshot();
  ASSERT_EQ(segments.size(), 1u);
  ASSERT_EQ(segments[0].blocks.size(), 2u);
  EXPECT_EQ(segments[0].blocks[1].size, 11 * kMiB);
  a.free(p);
  // 19 MiB from the cached 20 MiB block leaves 1 MiB: not worth a split.
  void* q = a.allocate(19 * kMiB, nullptr);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.allocation_size(q), 20 * kMiB);
  EXPECT_EQ(a.stats().num_device_alloc, 1);
  a.free(q);
}

TEST_F(CachingAllocatorTest, StatsFollowCudaMeaning) {
  auto& a = make();
  void* p = a.allocate(1000, nullptr);
  void* q = a.allocate(3 * kMiB, nullptr);
  auto s = a.stats();
  EXPECT_EQ(s.allocation[kAll].current, 2);
  EXPECT_EQ(s.allocation[kSmall].current, 1);
  EXPECT_EQ(s.allocation[kLarge].current, 1);
  EXPECT_EQ(s.allocated_bytes[kAll].current,
            static_cast<int64_t>(1024 + 3 * kMiB));
  EXPECT_EQ(s.requested_bytes[kAll].current,
            static_cast<int64_t>(1000 + 3 * kMiB));
  EXPECT_EQ(s.active[kAll].current, 2);
  EXPECT_EQ(s.active_bytes[kAll].current, s.allocated_bytes[kAll].current);
  EXPECT_EQ(s.segment[kAll].current, 2);
  EXPECT_EQ(s.reserved_bytes[kAll].current, static_cast<int64_t>(22 * kMiB));
  EXPECT_EQ(s.num_device_alloc, 2);
  EXPECT_EQ(s.max_split_size, -1);

  a.free(p);
  a.free(q);
  s = a.stats();
  EXPECT_EQ(s.allocation[kAll].current, 0);
  EXPECT_EQ(s.allocation[kAll].allocated, 2);
  EXPECT_EQ(s.allocation[kAll].freed, 2);
  EXPECT_EQ(s.allocated_bytes[kAll].current, 0);
  EXPECT_EQ(s.allocated_bytes[kAll].peak,
            static_cast<int64_t>(1024 + 3 * kMiB));
  EXPECT_EQ(s.requested_bytes[kAll].current, 0);
  EXPECT_EQ(s.active_bytes[kAll].current, 0);
  EXPECT_EQ(s.reserved_bytes[kAll].current, static_cast<int64_t>(22 * kMiB))
      << "reserved drops only when segments are released";

  a.reset_peak_stats();
  s = a.stats();
  EXPECT_EQ(s.allocated_bytes[kAll].peak, 0);
  EXPECT_EQ(s.reserved_bytes[kAll].peak, static_cast<int64_t>(22 * kMiB));

  a.empty_cache();
  s = a.stats();
  EXPECT_EQ(s.reserved_bytes[kAll].current, 0);
  EXPECT_EQ(s.segment[kAll].current, 0);
  EXPECT_EQ(s.num_device_free, 2);
  EXPECT_EQ(driver_.used_memory(0), 0u);

  a.reset_accumulated_stats();
  s = a.stats();
  EXPECT_EQ(s.allocation[kAll].allocated, 0);
  EXPECT_EQ(s.allocation[kAll].freed, 0);
  EXPECT_EQ(s.reserved_bytes[kAll].freed, 0);
  EXPECT_EQ(s.num_device_alloc, 0);
  EXPECT_EQ(s.num_device_free, 0);
  EXPECT_EQ(s.num_sync_all_streams, 0);
  EXPECT_EQ(s.reserved_bytes[kAll].peak, static_cast<int64_t>(22 * kMiB))
      << "peaks survive reset_accumulated_stats";
}

TEST_F(CachingAllocatorTest, OutOfMemoryReportsAndRecovers) {
  auto& a = make(32 * kMiB);
  void* keep = a.allocate(12 * kMiB, nullptr);  // 12 MiB segment
  try {
    a.allocate(40 * kMiB, nullptr);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.device(), 0);
    EXPECT_EQ(e.requested(), 40 * kMiB);
    EXPECT_EQ(e.capacity(), 32 * kMiB);
    EXPECT_EQ(e.allocated(), 12 * kMiB);
    EXPECT_EQ(e.reserved(), 12 * kMiB);
    EXPECT_STREQ(e.what(),
                 "OpenNeuron out of memory on device 0: tried to allocate "
                 "40.00 MiB; 12.00 MiB allocated by PyTorch and 12.00 MiB "
                 "reserved on this device; the device's allocator holds at "
                 "most 32.00 MiB. Free tensors, call "
                 "torch.neuron.empty_cache(), or raise that limit.");
  }
  auto s = a.stats();
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.allocation[kAll].current, 1);
  EXPECT_EQ(s.reserved_bytes[kAll].current, static_cast<int64_t>(12 * kMiB));

  // Still usable, within the remaining room.
  void* more = a.allocate(16 * kMiB, nullptr);
  EXPECT_NE(more, nullptr);
  std::memset(more, 0xAB, 16 * kMiB);
  EXPECT_THROW(a.allocate(8 * kMiB, nullptr), OutOfMemoryError);
  EXPECT_EQ(a.stats().num_ooms, 2);
  a.free(more);
  a.free(keep);
  EXPECT_EQ(a.stats().allocated_bytes[kAll].current, 0);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes[kAll].current, 0);
  EXPECT_EQ(driver_.used_memory(0), 0u);
  EXPECT_TRUE(a.snapshot().empty());
}

TEST_F(CachingAllocatorTest, RetriesAfterReleasingTheCache) {
  auto& a = make(40 * kMiB);
  void* p = a.allocate(12 * kMiB, nullptr);
  a.free(p);  // 12 MiB cached
  EXPECT_EQ(a.stats().num_alloc_retries, 0);
  void* q = a.allocate(30 * kMiB, nullptr);  // fits only without the cache
  ASSERT_NE(q, nullptr);
  auto s = a.stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.num_device_free, 1);
  EXPECT_EQ(s.reserved_bytes[kAll].current, static_cast<int64_t>(30 * kMiB));
  a.free(q);
}

TEST_F(CachingAllocatorTest, ReservedNeverExceedsCapacity) {
  const size_t capacity = 64 * kMiB;
  auto& a = make(capacity);
  std::vector<void*> ptrs;
  try {
    for (;;) ptrs.push_back(a.allocate(3 * kMiB, nullptr));
  } catch (const OutOfMemoryError&) {
  }
  EXPECT_GE(ptrs.size(), 18u);
  auto s = a.stats();
  EXPECT_LE(s.reserved_bytes[kAll].peak, static_cast<int64_t>(capacity));
  EXPECT_LE(driver_.used_memory(0), capacity);
  for (void* p : ptrs) a.free(p);
}

TEST_F(CachingAllocatorTest, MidSizeRequestFitsNearCapacity) {
  auto& a = make(16 * kMiB);
  // A 2 MiB request normally takes a 20 MiB segment; near the capacity a
  // segment of its own size is used instead.
  void* p = a.allocate(2 * kMiB, nullptr);
  EXPECT_EQ(a.snapshot().at(0).total_size, 2 * kMiB);
  a.free(p);
}

TEST_F(CachingAllocatorTest, RecordStreamDelaysReuse) {
  auto& a = make();
  auto qa = driver_.create_queue(0, 0);
  auto qb = driver_.create_queue(0, 0);
  Gate gate;
  qb->host_task(gate.task());  // qb is busy until released

  void* p = a.allocate(1000, qa.get());
  a.record_stream(p, qb.get());
  a.record_stream(p, qa.get());  // the allocating queue: no effect
  a.free(p);
  auto s = a.stats();
  EXPECT_EQ(s.allocation[kAll].current, 0) << "freed for the client";
  EXPECT_EQ(s.active[kAll].current, 1) << "still in use by qb";
  EXPECT_EQ(s.active_bytes[kAll].current, 1024);
  auto segments = a.snapshot();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_FALSE(segments[0].blocks[0].allocated);
  EXPECT_TRUE(segments[0].blocks[0].active);

  void* q = a.allocate(1000, qa.get());
  EXPECT_NE(q, p) << "must not reuse while qb may still use it";

  gate.release();
  qb->synchronize();
  void* r = a.allocate(1000, qa.get());
  EXPECT_EQ(r, p) << "reused once qb finished";
  EXPECT_EQ(a.stats().active[kAll].current, 2);
  a.free(q);
  a.free(r);
  EXPECT_EQ(a.stats().active[kAll].current, 0);
}

TEST_F(CachingAllocatorTest, EmptyCacheWaitsForPendingFrees) {
  auto& a = make();
  auto qa = driver_.create_queue(0, 0);
  auto qb = driver_.create_queue(0, 0);
  void* p = a.allocate(5 * kMiB, qa.get());
  std::atomic<bool> qb_done{false};
  qb->host_task([&qb_done] {
    std::this_thread::sleep_for(30ms);
    qb_done = true;
  });
  a.record_stream(p, qb.get());
  a.free(p);
  const int64_t syncs = a.stats().num_sync_all_streams;
  a.empty_cache();
  EXPECT_TRUE(qb_done) << "empty_cache waited for qb";
  auto s = a.stats();
  EXPECT_EQ(s.num_sync_all_streams, syncs + 1);
  EXPECT_EQ(s.active[kAll].current, 0);
  EXPECT_EQ(s.reserved_bytes[kAll].current, 0);
  EXPECT_EQ(driver_.used_memory(0), 0u);
}

TEST_F(CachingAllocatorTest, ThreadSafetySmoke) {
  auto& a = make(kDriverCapacity);
  std::atomic<int> corrupted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a, &corrupted, t] {
      std::mt19937 rng(1234 + t);
      std::uniform_int_distribution<size_t> size_dist(1, 2 * kMiB);
      std::vector<std::pair<unsigned char*, size_t>> live;
      for (int i = 0; i < 2000; ++i) {
        if (live.size() < 16 && (live.empty() || rng() % 2 == 0)) {
          size_t size = rng() % 8 == 0 ? size_dist(rng) : 1 + rng() % 8192;
          auto* p = static_cast<unsigned char*>(a.allocate(size, nullptr));
          // Ends only: writing megabytes per step would just slow the test.
          p[0] = p[size - 1] = static_cast<unsigned char>(t);
          live.emplace_back(p, size);
        } else {
          size_t k = rng() % live.size();
          auto [p, size] = live[k];
          if (p[0] != t || p[size - 1] != t) ++corrupted;
          a.free(p);
          live.erase(live.begin() + static_cast<long>(k));
        }
      }
      for (auto [p, size] : live) a.free(p);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(corrupted, 0);
  auto s = a.stats();
  EXPECT_EQ(s.allocation[kAll].current, 0);
  EXPECT_EQ(s.allocated_bytes[kAll].current, 0);
  EXPECT_EQ(s.active[kAll].current, 0);
  EXPECT_EQ(s.inactive_split[kAll].current, 0);
  EXPECT_EQ(s.num_ooms, 0);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes[kAll].current, 0);
  EXPECT_EQ(driver_.used_memory(0), 0u);
}

TEST_F(CachingAllocatorTest, DestructionReturnsEverythingToDriver) {
  {
    auto& a = make();
    a.allocate(1000, nullptr);  // leaked by the client on purpose
    void* p = a.allocate(3 * kMiB, nullptr);
    a.free(p);
    EXPECT_GT(driver_.used_memory(0), 0u);
    allocator_.reset();
  }
  EXPECT_EQ(driver_.used_memory(0), 0u);
}

TEST(DeviceAllocatorTest, OnePerDevice) {
  CachingAllocator& a0 = device_allocator(0);
  EXPECT_EQ(&a0, &device_allocator(0));
  EXPECT_EQ(a0.device(), 0);
  EXPECT_EQ(a0.capacity(), driver().properties(0).total_memory);
  if (driver().device_count() > 1) {
    EXPECT_NE(&device_allocator(1), &a0);
    EXPECT_EQ(device_allocator(1).device(), 1);
  }
  EXPECT_THROW(device_allocator(-1), InvalidDeviceError);
  EXPECT_THROW(device_allocator(driver().device_count()), InvalidDeviceError);
  void* p = a0.allocate(100, nullptr);
  EXPECT_TRUE(a0.owns(p));
  a0.free(p);
}

}  // namespace
}  // namespace openneuron::hal

namespace openneuron::hal {
namespace {

constexpr size_t kMiB2 = size_t{1} << 20;

// Host devices take the same RAM: their allocations share one budget, so
// two devices cannot together hold more than the machine was given.
TEST(HostDriverBudgetTest, DevicesShareOneBudget) {
  HostDriver driver(4, 64 * kMiB2);
  CachingAllocator a0(driver, 0, driver.properties(0).total_memory);
  CachingAllocator a1(driver, 1, driver.properties(1).total_memory);
  void* p = a0.allocate(40 * kMiB2, nullptr);
  EXPECT_EQ(driver.memory_budget(1).free, 24 * kMiB2);
  EXPECT_EQ(driver.memory_budget(0).free, 24 * kMiB2);
  try {
    a1.allocate(40 * kMiB2, nullptr);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.device(), 1);
    EXPECT_NE(std::string(e.what()).find("the 4 host devices share 64.00 MiB "
                                         "(OPENNEURON_HOST_DEVICE_MEMORY), "
                                         "24.00 MiB of it free"),
              std::string::npos)
        << e.what();
  }
  a0.free(p);  // cached by a0: a1 still cannot have it...
  EXPECT_THROW(a1.allocate(40 * kMiB2, nullptr), OutOfMemoryError);
  int reclaimed_for = -1;
  a1.set_reclaim([&](int device) {  // ...until a1 may reclaim it
    reclaimed_for = device;
    a0.empty_cache();
  });
  void* q = a1.allocate(40 * kMiB2, nullptr);
  EXPECT_EQ(reclaimed_for, 1);
  EXPECT_EQ(a1.stats().num_ooms, 2);  // the two failures above, not this one
  EXPECT_NE(q, nullptr);
  a1.free(q);
}

TEST(HostDriverBudgetTest, MemoryFractionBoundsOneAllocator) {
  HostDriver driver(2, 64 * kMiB2);
  CachingAllocator a0(driver, 0, driver.properties(0).total_memory);
  a0.set_memory_fraction(0.5);
  EXPECT_EQ(a0.memory_fraction(), 0.5);
  EXPECT_EQ(a0.memory_limit(), 32 * kMiB2);
  try {
    a0.allocate(40 * kMiB2, nullptr);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "this process may use 32.00 MiB of device 0 "
                  "(torch.neuron.set_per_process_memory_fraction(0.5))"),
              std::string::npos)
        << e.what();
  }
  void* p = a0.allocate(30 * kMiB2, nullptr);  // under the fraction: fine
  EXPECT_NE(p, nullptr);
  a0.free(p);
  EXPECT_THROW(a0.set_memory_fraction(1.5), InvalidArgumentError);
  EXPECT_THROW(a0.set_memory_fraction(-0.1), InvalidArgumentError);
  a0.set_memory_fraction(1.0);
  p = a0.allocate(40 * kMiB2, nullptr);
  EXPECT_NE(p, nullptr);
  a0.free(p);
}

// A device whose single allocations are bounded below its capacity (as a
// Vulkan device's maxMemoryAllocationSize is).
class SmallAllocationDriver : public HostDriver {
 public:
  SmallAllocationDriver() : HostDriver(1, 64 * kMiB2) {}
  DeviceProperties properties(int device) const override {
    DeviceProperties props = HostDriver::properties(device);
    props.max_allocation = 8 * kMiB2;
    return props;
  }
};

TEST(MaxAllocationTest, LargerRequestFailsAtOnceNamingTheLimit) {
  SmallAllocationDriver driver;
  CachingAllocator a(driver, 0, driver.properties(0).total_memory);
  void* small = a.allocate(6 * kMiB2, nullptr);  // the segment stays within the limit
  EXPECT_NE(small, nullptr);
  try {
    a.allocate(9 * kMiB2, nullptr);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("holds at most 8.00 MiB (the driver's max_allocation)"),
              std::string::npos)
        << e.what();
  }
  void* again = a.allocate(8 * kMiB2, nullptr);  // still usable, up to the limit
  EXPECT_NE(again, nullptr);
  a.free(again);
  a.free(small);
}

}  // namespace
}  // namespace openneuron::hal
