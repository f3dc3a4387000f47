// What the driver conformance suite does not reach in the vulkan driver:
// batches longer than one submission, barriers between dependent kernels,
// copies too large to stage at once, fills through the doubling path,
// read-back ordering, several threads, and where the hazard tracker puts
// barriers. Runs with the validation layer on (CMakeLists.txt).
#if OPENNEURON_HAL_VULKAN
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <numeric>
#include <thread>
#include <vector>

#include "hal/drivers/vulkan/spirv_executable_file.h"
#include "hal/drivers/vulkan/vulkan_device.h"
#include "hal/drivers/vulkan/vulkan_hazards.h"
#include "hal/drivers/vulkan/vulkan_host_import.h"
#include "hal/drivers/vulkan/vulkan_memory.h"
#include "hal/drivers/vulkan/vulkan_queue.h"
#include "hal/pinned_allocator.h"
#include "hal/registry.h"
#include "test_util.h"

namespace openneuron::hal {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// out[i] = in[i] * a + b, over n elements.
const char* kAxpbGlsl = R"(#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Args {
  uint64_t bindings[2];
  int64_t scalars[3];
};
layout(push_constant) uniform Push { Args args; };
void main() {
  Floats src = Floats(args.bindings[0]);
  Floats dst = Floats(args.bindings[1]);
  const uint n = uint(args.scalars[2]);
  for (uint i = gl_GlobalInvocationID.x; i < n; i += gl_NumWorkGroups.x * 64)
    dst.v[i] = src.v[i] * float(args.scalars[0]) + float(args.scalars[1]);
}
)";

class VulkanDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    driver_ = create_driver("vulkan");
    static const std::string path = [] {
      const auto dir = std::filesystem::temp_directory_path() /
                       ("openneuron_vulkan_test_" + std::to_string(getpid()));
      std::filesystem::create_directories(dir);
      SpirvEntry entry;
      entry.info = EntryInfo{"axpb", 2, 3, {64, 1, 1}};
      entry.spirv = test_util::compile_glsl(kAxpbGlsl, "axpb");
      const std::string file = (dir / "axpb.spvx").string();
      write_spirv_executable(file, {entry});
      return file;
    }();
    exe_ = driver_->load_executable(0, path);
  }
  void TearDown() override {
    exe_.reset();
    driver_.reset();
    EXPECT_EQ(vulkan_validation_message_count(), 0u);
  }

  void axpb(Queue& queue, void* src, void* dst, int64_t n, int64_t a, int64_t b) {
    const DeviceAddress bindings[] = {src, dst};
    const int64_t scalars[] = {a, b, n};
    queue.dispatch(*exe_, 0, bindings, scalars, Grid{(n + 63) / 64, 1, 1});
  }

  std::unique_ptr<Driver> driver_;
  std::unique_ptr<Executable> exe_;
};

// 300 kernels, each reading what the one before wrote: more than a batch
// holds, so ordering across submissions and barriers within them both count.
TEST_F(VulkanDriverTest, DependentKernelChainAcrossBatches) {
  const int n = 4096, steps = 300;
  void* a = driver_->allocate(0, n * 4);
  void* b = driver_->allocate(0, n * 4);
  auto queue = driver_->create_queue(0, 0);
  queue->fill(a, n * 4, 0, 4);
  for (int i = 0; i < steps; ++i) axpb(*queue, i % 2 ? b : a, i % 2 ? a : b, n, 1, 1);
  std::vector<float> out(n);
  queue->copy_async(out.data(), steps % 2 ? b : a, n * 4, CopyKind::DeviceToHost);
  queue->synchronize();
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], static_cast<float>(steps)) << i;
  driver_->free(0, a, n * 4);
  driver_->free(0, b, n * 4);
}

// Copies above the staging bound go in pieces, in queue order.
TEST_F(VulkanDriverTest, CopiesLargerThanStaging) {
  const size_t bytes = 2 * VulkanQueueCore::kMaxStagedCopy + 12345;
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  void* d = driver_->allocate(0, bytes);
  void* e = driver_->allocate(0, bytes);
  ASSERT_NE(d, nullptr);
  ASSERT_NE(e, nullptr);
  driver_->copy(d, data.data(), bytes, CopyKind::HostToDevice);
  auto queue = driver_->create_queue(0, 0);
  queue->copy_async(e, d, bytes, CopyKind::DeviceToDevice);
  std::vector<uint8_t> back(bytes);
  queue->copy_async(back.data(), e, bytes, CopyKind::DeviceToHost);
  queue->synchronize();
  EXPECT_EQ(back, data);
  driver_->free(0, d, bytes);
  driver_->free(0, e, bytes);
}

// An 8-byte pattern at an odd size goes through the doubling copies.
TEST_F(VulkanDriverTest, LargeFillWithEightBytePattern) {
  const size_t bytes = 3 * kMiB + 8 * 13;
  void* d = driver_->allocate(0, bytes + 16);
  auto queue = driver_->create_queue(0, 0);
  queue->fill(d, bytes + 16, 0xABABABABABABABABull, 8);
  queue->fill(static_cast<char*>(d) + 8, bytes, 0x1122334455667788ull, 8);
  std::vector<uint64_t> back((bytes + 16) / 8);
  queue->copy_async(back.data(), d, bytes + 16, CopyKind::DeviceToHost);
  queue->synchronize();
  EXPECT_EQ(back.front(), 0xABABABABABABABABull);
  EXPECT_EQ(back.back(), 0xABABABABABABABABull);
  for (size_t i = 1; i + 1 < back.size(); ++i) ASSERT_EQ(back[i], 0x1122334455667788ull) << i;
  driver_->free(0, d, bytes + 16);
}

// Small allocations share 64 MiB blocks (a few vkAllocateMemory calls for
// many segments); neighbours in a block keep their own contents; a block
// goes back to the device once its last allocation is freed; a large
// allocation has a block of its own.
TEST_F(VulkanDriverTest, SmallAllocationsShareBlocks) {
  const size_t total = driver_->memory_budget(0).total;
  auto reserved = [&] { return total - driver_->memory_budget(0).free; };
  ASSERT_EQ(reserved(), 0u);
  std::vector<void*> small;
  for (int i = 0; i < 40; ++i) small.push_back(driver_->allocate(0, 2 * kMiB));
  void* odd = driver_->allocate(0, 1000);  // not a multiple of the alignment
  EXPECT_EQ(reserved(), 2 * VulkanMemory::kBlockBytes);
  EXPECT_EQ(driver_->used_memory(0), 80 * kMiB + 1000);
  auto queue = driver_->create_queue(0, 0);
  // Kernels address each through the block's device address plus its offset.
  const int64_t n = 2 * kMiB / 4;
  for (int i = 0; i < 40; ++i) queue->fill(small[i], 2 * kMiB, 0, 4);
  for (int i = 0; i < 40; ++i) axpb(*queue, small[i], small[i], n, 1, i);
  queue->fill(odd, 1000, 0xEEEEEEEEu, 4);
  for (int i = 0; i < 40; i += 13) {
    std::vector<float> back(n);
    queue->copy_async(back.data(), small[i], 2 * kMiB, CopyKind::DeviceToHost);
    queue->synchronize();
    ASSERT_EQ(back.front(), static_cast<float>(i));
    ASSERT_EQ(back.back(), static_cast<float>(i));
  }
  void* big = driver_->allocate(0, 5 * kMiB);
  EXPECT_EQ(reserved(), 2 * VulkanMemory::kBlockBytes + 5 * kMiB);
  queue->synchronize();
  driver_->free(0, big, 5 * kMiB);
  for (int i = 0; i < 32; ++i) driver_->free(0, small[i], 2 * kMiB);  // empties the first block
  EXPECT_EQ(reserved(), VulkanMemory::kBlockBytes);
  void* again = driver_->allocate(0, 2 * kMiB);  // fits the second block's room
  EXPECT_EQ(reserved(), VulkanMemory::kBlockBytes);
  driver_->free(0, again, 2 * kMiB);
  for (int i = 32; i < 40; ++i) driver_->free(0, small[i], 2 * kMiB);
  driver_->free(0, odd, 1000);
  EXPECT_EQ(reserved(), 0u);
  EXPECT_EQ(driver_->used_memory(0), 0u);
}

// A read-back still queued lands before a later upload reads the same
// host memory (as CUDA orders copies from pageable memory).
TEST_F(VulkanDriverTest, UploadAfterQueuedReadBackSeesIt) {
  const int n = 1024;
  std::vector<float> host(n, 0.0f);
  std::vector<float> ones(n, 1.0f);
  void* a = driver_->allocate(0, n * 4);
  void* b = driver_->allocate(0, n * 4);
  auto queue = driver_->create_queue(0, 0);
  queue->copy_async(a, ones.data(), n * 4, CopyKind::HostToDevice);
  axpb(*queue, a, a, n, 3, 0);  // a = 3
  queue->copy_async(host.data(), a, n * 4, CopyKind::DeviceToHost);
  queue->copy_async(b, host.data(), n * 4, CopyKind::HostToDevice);
  std::vector<float> out(n);
  queue->copy_async(out.data(), b, n * 4, CopyKind::DeviceToHost);
  queue->synchronize();
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], 3.0f) << i;
  driver_->free(0, a, n * 4);
  driver_->free(0, b, n * 4);
}

// Queues used from several threads at once, each with its own chain.
TEST_F(VulkanDriverTest, ThreadsWithTheirOwnQueues) {
  const int n = 2048, steps = 50, threads = 4;
  std::vector<std::thread> workers;
  std::vector<float> results(threads, -1.0f);
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto queue = driver_->create_queue(0, 0);
      void* a = driver_->allocate(0, n * 4);
      queue->fill(a, n * 4, 0, 4);
      for (int i = 0; i < steps; ++i) axpb(*queue, a, a, n, 1, t + 1);
      float last = 0;
      queue->copy_async(&last, static_cast<char*>(a) + (n - 1) * 4, 4, CopyKind::DeviceToHost);
      queue->synchronize();
      results[t] = last;
      driver_->free(0, a, n * 4);
    });
  }
  for (auto& w : workers) w.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(results[t], static_cast<float>(steps * (t + 1)));
}

// Device time of real work, from timestamp queries.
TEST_F(VulkanDriverTest, EventsTimeKernels) {
  const int n = 1 << 20;
  void* a = driver_->allocate(0, n * 4);
  auto queue = driver_->create_queue(0, 0);
  auto start = driver_->create_event(0, true);
  auto end = driver_->create_event(0, true);
  queue->fill(a, n * 4, 0, 4);
  queue->record(*start);
  for (int i = 0; i < 20; ++i) axpb(*queue, a, a, n, 1, 1);
  queue->record(*end);
  end->synchronize();
  EXPECT_GT(start->elapsed_ms(*end), 0.0);
  driver_->free(0, a, n * 4);
}

// Pinned memory is imported (lavapipe has VK_EXT_external_memory_host): an
// upload reads the block when the copy runs, not at enqueue (a staged copy
// would have taken the values of the enqueue), and a download into a block
// followed by an upload from it, in one batch, gets its barrier.
TEST_F(VulkanDriverTest, PinnedCopiesUseTheBlockItself) {
  const int n = 1 << 20;
  const size_t bytes = n * 4;
  auto* p = static_cast<float*>(pinned_allocator().allocate(bytes));
  auto* q = static_cast<float*>(pinned_allocator().allocate(bytes));
  auto* r = static_cast<float*>(pinned_allocator().allocate(bytes));
  std::fill(p, p + n, 1.0f);
  void* a = driver_->allocate(0, bytes);
  void* b = driver_->allocate(0, bytes);
  auto queue = driver_->create_queue(0, 0);
  std::atomic<bool> go{false};
  queue->host_task([&] { while (!go) std::this_thread::yield(); });
  queue->copy_async(a, p, bytes, CopyKind::HostToDevice);
  std::fill(p, p + n, 2.0f);  // before the copy ran: the copy sees 2
  go = true;
  axpb(*queue, a, a, n, 3, 0);  // a = 6
  queue->copy_async(q, a, bytes, CopyKind::DeviceToHost);
  queue->copy_async(b, q, bytes, CopyKind::HostToDevice);
  axpb(*queue, b, b, n, 1, 1);  // b = 7
  queue->copy_async(r, b, bytes, CopyKind::DeviceToHost);
  queue->synchronize();
  for (int i = 0; i < n; ++i) ASSERT_EQ(r[i], 7.0f) << i;
  for (float* block : {p, q, r}) pinned_allocator().free(block);
  driver_->free(0, a, bytes);
  driver_->free(0, b, bytes);
}

// Imports cover whole live pinned blocks only, and go with their block.
TEST(VulkanHostImportTest, ImportsLivePinnedBlocksAndForgetsReleasedOnes) {
  VulkanContext context;
  HostImports imports(context.device(0));
  ASSERT_GT(context.device(0).host_import_alignment(), 0u) << "lavapipe imports host memory";
  std::vector<char> pageable(8192);
  EXPECT_FALSE(imports.resolve(pageable.data(), 16));
  char* block = static_cast<char*>(pinned_allocator().allocate(10000));  // a 16 KiB block
  auto whole = imports.resolve(block, 16384);
  ASSERT_TRUE(whole);
  auto inner = imports.resolve(block + 4100, 100);
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner->buffer, whole->buffer);
  EXPECT_EQ(inner->offset, 4100u);
  EXPECT_FALSE(imports.resolve(block + 16000, 1000));  // past the block's end
  EXPECT_EQ(imports.imported_blocks(), 1u);
  pinned_allocator().free(block);
  EXPECT_FALSE(imports.resolve(block, 16));  // freed: not live
  pinned_allocator().empty_cache();           // the block goes back to the OS
  EXPECT_EQ(imports.imported_blocks(), 0u);
}

TEST(HazardTrackerTest, BarriersOnlyWhereNeeded) {
  HazardTracker t;
  char m[1024];
  // Uploads to distinct ranges: no barrier.
  EXPECT_FALSE(t.needs_barrier(HazardTracker::write_only(m, 100)));
  EXPECT_FALSE(t.needs_barrier(HazardTracker::write_only(m + 100, 100)));
  // Reading what was written: a barrier.
  EXPECT_TRUE(t.needs_barrier(HazardTracker::copy(m + 500, m + 50, 10)));
  // Writing what was read since (write after read): a barrier.
  EXPECT_TRUE(t.needs_barrier(HazardTracker::write_only(m + 55, 1)));
  // Disjoint read: none.
  EXPECT_FALSE(t.needs_barrier(HazardTracker::read_only(m + 900, 10)));
  // A kernel touches everything: barriers on both sides.
  EXPECT_TRUE(t.needs_barrier(HazardTracker::everything()));
  EXPECT_TRUE(t.needs_barrier(HazardTracker::write_only(m + 1000, 4)));
  t.reset();
  EXPECT_FALSE(t.needs_barrier(HazardTracker::everything()));
}

}  // namespace
}  // namespace openneuron::hal
#endif
