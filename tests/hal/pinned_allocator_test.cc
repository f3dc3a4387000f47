// The pinned host allocator: power-of-two size classes, caching, is_pinned
// for interior pointers, and reuse deferred until recorded queue work ends.
#include "hal/pinned_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "hal/driver.h"
#include "hal/error.h"
#include "test_util.h"

namespace openneuron::hal {
namespace {

using test_util::Gate;

TEST(PinnedAllocatorTest, ZeroBytesAndNull) {
  PinnedAllocator a;
  EXPECT_EQ(a.allocate(0), nullptr);
  EXPECT_NO_THROW(a.free(nullptr));
  EXPECT_FALSE(a.is_pinned(nullptr));
}

TEST(PinnedAllocatorTest, RoundsToPowerOfTwoPages) {
  PinnedAllocator a;
  void* p = a.allocate(100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_EQ(a.stats().allocated_bytes, 4096);
  void* q = a.allocate(5000);
  EXPECT_EQ(a.stats().allocated_bytes, 4096 + 8192);
  void* r = a.allocate(size_t{1} << 20);
  EXPECT_EQ(a.stats().allocated_bytes, 4096 + 8192 + (1 << 20));
  std::memset(r, 0x5A, size_t{1} << 20);  // usable memory
  EXPECT_EQ(a.stats().num_host_alloc, 3);
  a.free(p);
  a.free(q);
  a.free(r);
  EXPECT_EQ(a.stats().allocated_bytes, 0);
  EXPECT_EQ(a.stats().reserved_bytes, 4096 + 8192 + (1 << 20));
}

TEST(PinnedAllocatorTest, IsPinnedCoversInteriorOfLiveBlocks) {
  PinnedAllocator a;
  auto* p = static_cast<char*>(a.allocate(6000));  // 8 KiB block
  EXPECT_TRUE(a.is_pinned(p));
  EXPECT_TRUE(a.is_pinned(p + 4000));
  EXPECT_TRUE(a.is_pinned(p + 8191));
  int local = 0;
  EXPECT_FALSE(a.is_pinned(&local));
  std::vector<char> heap(64);
  EXPECT_FALSE(a.is_pinned(heap.data()));
  a.free(p);
  EXPECT_FALSE(a.is_pinned(p)) << "a cached block is not live";
}

TEST(PinnedAllocatorTest, ReusesFreedBlockOfSameSizeClass) {
  PinnedAllocator a;
  void* p = a.allocate(3000);
  a.free(p);
  EXPECT_EQ(a.allocate(4096), p);
  void* other = a.allocate(3000);  // the cached block is taken: a new one
  EXPECT_NE(other, p);
  void* bigger = a.allocate(5000);  // another size class
  EXPECT_NE(bigger, p);
  EXPECT_EQ(a.stats().num_host_alloc, 3);
  a.free(p);
  a.free(other);
  a.free(bigger);
}

TEST(PinnedAllocatorTest, FreeOfUnknownPointerThrows) {
  PinnedAllocator a;
  int local = 0;
  EXPECT_THROW(a.free(&local), InvalidArgumentError);
  auto* p = static_cast<char*>(a.allocate(100));
  EXPECT_THROW(a.free(p + 16), InvalidArgumentError);
  a.free(p);
  EXPECT_THROW(a.free(p), InvalidArgumentError) << "double free";
}

TEST(PinnedAllocatorTest, EmptyCacheReleasesCachedBlocks) {
  PinnedAllocator a;
  void* p = a.allocate(4096);
  void* q = a.allocate(65536);
  a.free(p);
  a.empty_cache();
  auto s = a.stats();
  EXPECT_EQ(s.reserved_bytes, 65536);
  EXPECT_EQ(s.num_host_free, 1);
  EXPECT_TRUE(a.is_pinned(q));
  a.free(q);
  a.empty_cache();
  s = a.stats();
  EXPECT_EQ(s.reserved_bytes, 0);
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.num_host_free, 2);
}

TEST(PinnedAllocatorTest, RecordUseDelaysReuse) {
  PinnedAllocator a;
  auto queue = driver().create_queue(0, 0);
  Gate gate;
  queue->host_task(gate.task());
  void* p = a.allocate(4096);
  a.record_use(static_cast<char*>(p) + 100, *queue);  // interior pointer
  a.free(p);
  void* q = a.allocate(4096);
  EXPECT_NE(q, p) << "the queue may still use p";
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes, 2 * 4096)
      << "empty_cache keeps blocks the queue may still use";

  gate.release();
  queue->synchronize();
  void* r = a.allocate(4096);
  EXPECT_EQ(r, p) << "reused once the queue finished";
  a.free(q);
  a.free(r);
}

TEST(PinnedAllocatorTest, RecordUseOfOtherMemoryIsIgnored) {
  PinnedAllocator a;
  auto queue = driver().create_queue(0, 0);
  int local = 0;
  EXPECT_NO_THROW(a.record_use(&local, *queue));
}

TEST(PinnedAllocatorTest, AsyncCopyFromPinnedMemory) {
  PinnedAllocator a;
  auto queue = driver().create_queue(0, 0);
  constexpr size_t kBytes = 256 * 1024;
  auto* src = static_cast<unsigned char*>(a.allocate(kBytes));
  for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>(i);
  void* dev = driver().allocate(0, kBytes);
  ASSERT_NE(dev, nullptr);
  std::vector<unsigned char> back(kBytes);
  queue->copy_async(dev, src, kBytes, CopyKind::HostToDevice);
  a.record_use(src, *queue);
  a.free(src);  // safe: reuse waits for the copy
  queue->copy_async(back.data(), dev, kBytes, CopyKind::DeviceToHost);
  queue->synchronize();
  for (size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(back[i], static_cast<unsigned char>(i)) << "at " << i;
  }
  driver().free(0, dev, kBytes);
}

TEST(PinnedAllocatorTest, ThreadSafetySmoke) {
  PinnedAllocator a;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a, t] {
      for (int i = 0; i < 500; ++i) {
        size_t size = 1 + static_cast<size_t>((i * 7919 + t) % 20000);
        auto* p = static_cast<unsigned char*>(a.allocate(size));
        p[0] = p[size - 1] = static_cast<unsigned char>(t);
        EXPECT_TRUE(a.is_pinned(p + size - 1));
        a.free(p);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(a.stats().allocated_bytes, 0);
}

TEST(PinnedAllocatorTest, ProcessWideInstance) {
  EXPECT_EQ(&pinned_allocator(), &pinned_allocator());
  void* p = pinned_allocator().allocate(10);
  EXPECT_TRUE(pinned_allocator().is_pinned(p));
  pinned_allocator().free(p);
}

}  // namespace
}  // namespace openneuron::hal
