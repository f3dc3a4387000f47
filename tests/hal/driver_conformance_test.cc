// The contract every driver must meet. The suite runs once per registered
// driver name; a new driver passes it before the layers above may use it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "hal/config.h"
#include "hal/driver.h"
#include "hal/error.h"
#include "hal/registry.h"
#if OPENNEURON_HAL_VULKAN
#include "hal/drivers/vulkan/spirv_executable_file.h"
#include "hal/drivers/vulkan/vulkan_device.h"
#endif
#include "test_util.h"

namespace openneuron::hal {
namespace {

using namespace std::chrono_literals;
using test_util::Gate;

constexpr size_t kMiB = size_t{1} << 20;

std::vector<uint8_t> pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i)
    data[i] = static_cast<uint8_t>(i * 31 + seed);
  return data;
}

class DriverConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { driver_ = create_driver(GetParam()); }
  void TearDown() override {
    driver_.reset();
#if OPENNEURON_HAL_VULKAN
    // The suite runs with the validation layer on: any message fails.
    if (GetParam() == "vulkan") EXPECT_EQ(vulkan_validation_message_count(), 0u);
#endif
  }

  // Device memory filled from `data` with a synchronous copy.
  void* upload(int device, const std::vector<uint8_t>& data) {
    void* ptr = driver_->allocate(device, data.size());
    EXPECT_NE(ptr, nullptr);
    driver_->copy(ptr, data.data(), data.size(), CopyKind::HostToDevice);
    return ptr;
  }

  std::unique_ptr<Driver> driver_;
};

TEST_P(DriverConformanceTest, Enumeration) {
  EXPECT_EQ(driver_->name(), GetParam());
  EXPECT_GE(driver_->device_count(), 1);
}

TEST_P(DriverConformanceTest, Properties) {
  std::set<std::string> names;
  for (int d = 0; d < driver_->device_count(); ++d) {
    DeviceProperties props = driver_->properties(d);
    EXPECT_FALSE(props.name.empty());
    EXPECT_EQ(props.driver, GetParam());
    EXPECT_GT(props.total_memory, 0u);
    EXPECT_GT(props.max_allocation, 0u);
    EXPECT_LE(props.max_allocation, props.total_memory);
    EXPECT_GE(props.compute_units, 1);
    EXPECT_GE(props.subgroup_size, 1);
    EXPECT_FALSE(props.kernel_target.empty()) << "the compiler needs a target for this device";
    // Memory the host can address is what "unified" means for the CPU drivers;
    // a driver must not claim host access without it.
    if (props.host_addressable) EXPECT_TRUE(props.unified_memory);
    names.insert(props.name);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(driver_->device_count()))
      << "device names must be distinct";
}

TEST_P(DriverConformanceTest, HostDriverProperties) {
  if (GetParam() != "host") GTEST_SKIP() << "host driver only";
  EXPECT_EQ(driver_->device_count(), config().host_device_count);
  DeviceProperties props = driver_->properties(0);
  EXPECT_EQ(props.name, "OpenNeuron host device 0");
  EXPECT_EQ(props.driver, "host");
  EXPECT_EQ(props.total_memory, config().host_device_memory);
  EXPECT_TRUE(props.host_addressable);
  EXPECT_TRUE(props.runs_on_host_threads);
  unsigned threads = std::thread::hardware_concurrency();
  if (threads > 0) EXPECT_EQ(props.compute_units, static_cast<int>(threads));
}

TEST_P(DriverConformanceTest, ProtectedDriverProperties) {
  if (GetParam() != "protected") GTEST_SKIP() << "protected driver only";
  DeviceProperties props = driver_->properties(0);
  EXPECT_EQ(props.name, "OpenNeuron protected device 0");
  EXPECT_FALSE(props.host_addressable);
  EXPECT_FALSE(props.kernels_read_host_memory);
  EXPECT_FALSE(props.runs_on_host_threads);
}

// Device memory of a driver that says the host cannot address it really is
// closed: a host read faults (the protected driver maps it PROT_NONE).
TEST_P(DriverConformanceTest, HostAccessToClosedMemoryFaults) {
  if (driver_->properties(0).host_addressable) GTEST_SKIP() << "host-addressable memory";
  void* ptr = driver_->allocate(0, 4096);
  ASSERT_NE(ptr, nullptr);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH({ std::printf("%d", *static_cast<volatile char*>(ptr)); }, "");
  EXPECT_DEATH({ *static_cast<volatile char*>(ptr) = 1; }, "");
  driver_->free(0, ptr, 4096);
}

TEST_P(DriverConformanceTest, InvalidDeviceIndex) {
  const int count = driver_->device_count();
  for (int bad : {-1, count, count + 7}) {
    try {
      driver_->properties(bad);
      FAIL() << "no error for device " << bad;
    } catch (const InvalidDeviceError& e) {
      EXPECT_EQ(e.device(), bad);
      EXPECT_EQ(e.device_count(), count);
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)),
                std::string::npos);
    }
    EXPECT_THROW(driver_->allocate(bad, 4096), InvalidDeviceError);
    EXPECT_THROW(driver_->used_memory(bad), InvalidDeviceError);
    EXPECT_THROW(driver_->create_queue(bad, 0), InvalidDeviceError);
    EXPECT_THROW(driver_->create_event(bad, false), InvalidDeviceError);
    EXPECT_THROW(driver_->synchronize(bad), InvalidDeviceError);
  }
}

TEST_P(DriverConformanceTest, AllocateFreeAndUsedMemory) {
  EXPECT_EQ(driver_->used_memory(0), 0u);
  void* a = driver_->allocate(0, 2 * kMiB);
  void* b = driver_->allocate(0, 4096);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 256, 0u);
  EXPECT_EQ(driver_->used_memory(0), 2 * kMiB + 4096);
  driver_->free(0, a, 2 * kMiB);
  EXPECT_EQ(driver_->used_memory(0), 4096u);
  driver_->free(0, b, 4096);
  EXPECT_EQ(driver_->used_memory(0), 0u);
}

TEST_P(DriverConformanceTest, RefusesAllocationsPastCapacity) {
  const size_t capacity = driver_->properties(0).total_memory;
  EXPECT_EQ(driver_->allocate(0, capacity + 1), nullptr);
  void* a = driver_->allocate(0, kMiB);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(driver_->allocate(0, capacity - kMiB + 1), nullptr);
  EXPECT_EQ(driver_->used_memory(0), kMiB);
  driver_->free(0, a, kMiB);
  EXPECT_EQ(driver_->used_memory(0), 0u);
}

TEST_P(DriverConformanceTest, DevicesAccountMemorySeparately) {
  if (driver_->device_count() < 2) GTEST_SKIP() << "needs two devices";
  void* a = driver_->allocate(1, kMiB);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(driver_->used_memory(0), 0u);
  EXPECT_EQ(driver_->used_memory(1), kMiB);
  driver_->free(1, a, kMiB);
}

TEST_P(DriverConformanceTest, MemoryBudgetCountsAllocations) {
  const MemoryBudget before = driver_->memory_budget(0);
  EXPECT_EQ(before.total, driver_->properties(0).total_memory);
  EXPECT_LE(before.free, before.total);
  EXPECT_FALSE(before.description.empty());
  void* a = driver_->allocate(0, 4 * kMiB);
  ASSERT_NE(a, nullptr);
  EXPECT_LE(driver_->memory_budget(0).free + 4 * kMiB, before.free);
  driver_->free(0, a, 4 * kMiB);
  EXPECT_EQ(driver_->memory_budget(0).free, before.free);
  EXPECT_THROW(driver_->memory_budget(driver_->device_count()), InvalidDeviceError);
}

TEST_P(DriverConformanceTest, SynchronousCopies) {
  const auto data = pattern(kMiB + 123, 7);
  void* d1 = upload(0, data);
  void* d2 = driver_->allocate(0, data.size());
  ASSERT_NE(d2, nullptr);
  driver_->copy(d2, d1, data.size(), CopyKind::DeviceToDevice);
  std::vector<uint8_t> back(data.size());
  driver_->copy(back.data(), d2, data.size(), CopyKind::DeviceToHost);
  EXPECT_EQ(back, data);
  driver_->free(0, d1, data.size());
  driver_->free(0, d2, data.size());
}

TEST_P(DriverConformanceTest, AsynchronousCopies) {
  const auto data = pattern(3 * kMiB + 5, 42);
  void* d1 = driver_->allocate(0, data.size());
  void* d2 = driver_->allocate(0, data.size());
  ASSERT_NE(d1, nullptr);
  ASSERT_NE(d2, nullptr);
  std::vector<uint8_t> back(data.size());
  auto queue = driver_->create_queue(0, 0);
  queue->copy_async(d1, data.data(), data.size(), CopyKind::HostToDevice);
  queue->copy_async(d2, d1, data.size(), CopyKind::DeviceToDevice);
  queue->copy_async(back.data(), d2, data.size(), CopyKind::DeviceToHost);
  queue->synchronize();
  EXPECT_EQ(back, data);
  driver_->free(0, d1, data.size());
  driver_->free(0, d2, data.size());
}

// Device addresses take offsets by plain arithmetic (types.h).
TEST_P(DriverConformanceTest, CopiesAtOffsets) {
  const auto data = pattern(8192, 9);
  void* d = upload(0, data);
  auto* base = static_cast<char*>(d);
  const auto patch = pattern(100, 200);
  driver_->copy(base + 1000, patch.data(), patch.size(), CopyKind::HostToDevice);
  auto queue = driver_->create_queue(0, 0);
  queue->copy_async(base + 5000, base + 1000, 100, CopyKind::DeviceToDevice);
  std::vector<uint8_t> back(data.size());
  queue->copy_async(back.data(), d, data.size(), CopyKind::DeviceToHost);
  queue->synchronize();
  auto expected = data;
  std::copy(patch.begin(), patch.end(), expected.begin() + 1000);
  std::copy(patch.begin(), patch.end(), expected.begin() + 5000);
  EXPECT_EQ(back, expected);
  std::vector<uint8_t> middle(10);
  driver_->copy(middle.data(), base + 1003, 10, CopyKind::DeviceToHost);
  EXPECT_TRUE(std::equal(middle.begin(), middle.end(), patch.begin() + 3));
  driver_->free(0, d, data.size());
}

// A driver that checks addresses refuses a range outside every allocation
// with a typed error and stays usable.
TEST_P(DriverConformanceTest, CopyOutsideAllocationIsRefused) {
  if (driver_->properties(0).host_addressable) GTEST_SKIP() << "host pointers are not checked";
  const auto data = pattern(4096, 1);
  void* d = upload(0, data);
  std::vector<uint8_t> back(8192);
  EXPECT_THROW(driver_->copy(back.data(), d, 8192, CopyKind::DeviceToHost), InvalidArgumentError);
  EXPECT_THROW(driver_->copy(back.data(), back.data() + 1, 16, CopyKind::DeviceToHost),
               InvalidArgumentError);
  auto queue = driver_->create_queue(0, 0);
  EXPECT_THROW(queue->copy_async(static_cast<char*>(d) + 4000, data.data(), 200,
                                 CopyKind::HostToDevice),
               InvalidArgumentError);
  EXPECT_THROW(queue->fill(static_cast<char*>(d) + 4096, 4, 0, 4), InvalidArgumentError);
  driver_->copy(back.data(), d, 4096, CopyKind::DeviceToHost);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin()));
  driver_->free(0, d, data.size());
}

TEST_P(DriverConformanceTest, FillWithEveryPatternSize) {
  const size_t bytes = 4096;
  void* d = upload(0, pattern(bytes + 64, 5));
  auto* base = static_cast<char*>(d);
  auto queue = driver_->create_queue(0, 0);
  const uint64_t value = 0x0102030405060708ull;
  for (int size : {1, 2, 4, 8}) {
    queue->fill(base + 8, bytes, value, size);  // at an offset
    std::vector<uint8_t> back(bytes + 16);
    queue->copy_async(back.data(), d, back.size(), CopyKind::DeviceToHost);
    queue->synchronize();
    for (size_t i = 0; i < bytes; ++i) {
      uint8_t expected = static_cast<uint8_t>(value >> (8 * (i % size)));
      ASSERT_EQ(back[8 + i], expected) << "pattern size " << size << " byte " << i;
    }
    EXPECT_EQ(back[bytes + 8], pattern(bytes + 64, 5)[bytes + 8]) << "fill wrote past its end";
  }
  EXPECT_THROW(queue->fill(d, 12, 0, 3), InvalidArgumentError);
  EXPECT_THROW(queue->fill(d, 12, 0, 8), InvalidArgumentError);
  queue->fill(d, 0, 0, 4);  // nothing to do
  queue->synchronize();
  driver_->free(0, d, bytes + 64);
}

TEST_P(DriverConformanceTest, UpdateCapturesBytesAtTheCall) {
  void* d = upload(0, pattern(256, 0));
  auto queue = driver_->create_queue(0, 0);
  Gate gate;
  queue->host_task(gate.task());  // the update cannot run before the reuse below
  std::vector<uint8_t> src = pattern(64, 77);
  const auto expected = src;
  queue->update(static_cast<char*>(d) + 32, src.data(), src.size());
  std::fill(src.begin(), src.end(), 0);
  gate.release();
  std::vector<uint8_t> back(64);
  queue->copy_async(back.data(), static_cast<char*>(d) + 32, 64, CopyKind::DeviceToHost);
  queue->synchronize();
  EXPECT_EQ(back, expected);
  std::vector<uint8_t> big(Queue::kMaxUpdateBytes + 1);
  EXPECT_THROW(queue->update(d, big.data(), big.size()), InvalidArgumentError);
  driver_->free(0, d, 256);
}

TEST_P(DriverConformanceTest, CopiesOnSecondDevice) {
  if (driver_->device_count() < 2) GTEST_SKIP() << "needs two devices";
  const auto data = pattern(4096, 3);
  void* d = driver_->allocate(1, data.size());
  ASSERT_NE(d, nullptr);
  auto queue = driver_->create_queue(1, 0);
  EXPECT_EQ(queue->device(), 1);
  std::vector<uint8_t> back(data.size());
  queue->copy_async(d, data.data(), data.size(), CopyKind::HostToDevice);
  queue->copy_async(back.data(), d, data.size(), CopyKind::DeviceToHost);
  queue->synchronize();
  EXPECT_EQ(back, data);
  driver_->free(1, d, data.size());
}

TEST_P(DriverConformanceTest, QueueAttributes) {
  auto queue = driver_->create_queue(0, -1);
  EXPECT_EQ(queue->device(), 0);
  EXPECT_EQ(queue->priority(), -1);
  EXPECT_TRUE(queue->query()) << "a new queue is idle";
  queue->synchronize();
}

TEST_P(DriverConformanceTest, QueueRunsCommandsInOrder) {
  auto queue = driver_->create_queue(0, 0);
  std::vector<int> order;
  constexpr int kTasks = 1000;
  for (int i = 0; i < kTasks; ++i) {
    queue->host_task([&order, i] { order.push_back(i); });
  }
  queue->synchronize();
  std::vector<int> expected(kTasks);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(order, expected);
}

TEST_P(DriverConformanceTest, QueueQueryAndSynchronize) {
  auto queue = driver_->create_queue(0, 0);
  Gate gate;
  std::atomic<bool> ran{false};
  queue->host_task(gate.task());
  queue->host_task([&ran] { ran = true; });
  EXPECT_FALSE(queue->query());
  EXPECT_FALSE(ran);
  gate.release();
  queue->synchronize();
  EXPECT_TRUE(ran);
  EXPECT_TRUE(queue->query());
}

TEST_P(DriverConformanceTest, HostTaskErrorIsRethrownOnce) {
  auto queue = driver_->create_queue(0, 0);
  std::atomic<bool> later_ran{false};
  queue->host_task([] { throw std::runtime_error("boom from host_task"); });
  queue->host_task([] { throw std::runtime_error("second error"); });
  queue->host_task([&later_ran] { later_ran = true; });
  try {
    queue->synchronize();
    FAIL() << "synchronize did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom from host_task") << "the first error wins";
  }
  EXPECT_TRUE(later_ran) << "commands after a failure still run";
  EXPECT_NO_THROW(queue->synchronize()) << "the error is reported once";
  // The queue keeps working.
  std::atomic<int> value{0};
  queue->host_task([&value] { value = 5; });
  queue->synchronize();
  EXPECT_EQ(value, 5);
}

TEST_P(DriverConformanceTest, EventNeverRecordedIsComplete) {
  auto event = driver_->create_event(0, false);
  EXPECT_EQ(event->device(), 0);
  EXPECT_FALSE(event->timing_enabled());
  EXPECT_TRUE(event->query());
  event->synchronize();
}

TEST_P(DriverConformanceTest, EventRecordQuerySynchronize) {
  auto queue = driver_->create_queue(0, 0);
  auto event = driver_->create_event(0, false);
  Gate gate;
  queue->host_task(gate.task());
  queue->record(*event);
  EXPECT_FALSE(event->query());
  gate.release();
  event->synchronize();
  EXPECT_TRUE(event->query());
  queue->synchronize();
}

TEST_P(DriverConformanceTest, EventReRecordTracksLatestRecord) {
  auto queue = driver_->create_queue(0, 0);
  auto event = driver_->create_event(0, false);
  queue->record(*event);
  queue->synchronize();
  EXPECT_TRUE(event->query());
  Gate gate;
  queue->host_task(gate.task());
  queue->record(*event);
  EXPECT_FALSE(event->query());
  gate.release();
  event->synchronize();
  EXPECT_TRUE(event->query());
}

TEST_P(DriverConformanceTest, EventMayBeDestroyedBeforeItCompletes) {
  auto queue = driver_->create_queue(0, 0);
  Gate gate;
  queue->host_task(gate.task());
  {
    auto event = driver_->create_event(0, true);
    queue->record(*event);
  }
  gate.release();
  queue->synchronize();
  EXPECT_TRUE(queue->query());
}

TEST_P(DriverConformanceTest, EventElapsedTime) {
  auto queue = driver_->create_queue(0, 0);
  auto start = driver_->create_event(0, true);
  auto end = driver_->create_event(0, true);
  EXPECT_TRUE(start->timing_enabled());
  queue->record(*start);
  queue->host_task([] { std::this_thread::sleep_for(20ms); });
  queue->record(*end);
  end->synchronize();
  double ms = start->elapsed_ms(*end);
  EXPECT_GE(ms, 15.0);
  EXPECT_LT(ms, 10000.0);
}

TEST_P(DriverConformanceTest, EventElapsedTimeErrors) {
  auto queue = driver_->create_queue(0, 0);
  auto timed = driver_->create_event(0, true);
  auto untimed = driver_->create_event(0, false);
  auto never = driver_->create_event(0, true);
  queue->record(*timed);
  queue->record(*untimed);
  queue->synchronize();
  EXPECT_THROW(timed->elapsed_ms(*never), InvalidArgumentError);
  EXPECT_THROW(never->elapsed_ms(*timed), InvalidArgumentError);
  EXPECT_THROW(timed->elapsed_ms(*untimed), InvalidArgumentError);
  EXPECT_THROW(untimed->elapsed_ms(*timed), InvalidArgumentError);
  // Recorded but not complete yet.
  auto pending = driver_->create_event(0, true);
  Gate gate;
  queue->host_task(gate.task());
  queue->record(*pending);
  EXPECT_THROW(timed->elapsed_ms(*pending), InvalidArgumentError);
  gate.release();
  queue->synchronize();
  EXPECT_GE(timed->elapsed_ms(*pending), 0.0);
}

TEST_P(DriverConformanceTest, QueueWaitsForEventOfAnotherQueue) {
  auto a = driver_->create_queue(0, 0);
  auto b = driver_->create_queue(0, 0);
  auto event = driver_->create_event(0, false);
  std::atomic<bool> a_done{false};
  std::atomic<bool> b_saw_a_done{false};
  a->host_task([&a_done] {
    std::this_thread::sleep_for(50ms);
    a_done = true;
  });
  a->record(*event);
  b->wait(*event);
  b->host_task([&] { b_saw_a_done = a_done.load(); });
  b->synchronize();
  EXPECT_TRUE(b_saw_a_done);
  a->synchronize();
}

TEST_P(DriverConformanceTest, WaitBlocksUntilEventCompletes) {
  auto a = driver_->create_queue(0, 0);
  auto b = driver_->create_queue(0, 0);
  auto event = driver_->create_event(0, false);
  Gate gate;
  a->host_task(gate.task());
  a->record(*event);
  b->wait(*event);
  std::atomic<bool> b_ran{false};
  b->host_task([&b_ran] { b_ran = true; });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(b_ran);
  EXPECT_FALSE(b->query());
  gate.release();
  b->synchronize();
  EXPECT_TRUE(b_ran);
}

TEST_P(DriverConformanceTest, WaitOnUnrecordedEventDoesNotBlock) {
  auto queue = driver_->create_queue(0, 0);
  auto event = driver_->create_event(0, false);
  queue->wait(*event);
  queue->synchronize();
  EXPECT_TRUE(queue->query());
}

TEST_P(DriverConformanceTest, DeviceSynchronizeWaitsForEveryQueue) {
  auto a = driver_->create_queue(0, 0);
  auto b = driver_->create_queue(0, 1);
  std::atomic<int> done{0};
  for (auto* q : {a.get(), b.get()}) {
    q->host_task([&done] {
      std::this_thread::sleep_for(30ms);
      ++done;
    });
  }
  driver_->synchronize(0);
  EXPECT_EQ(done, 2);
  EXPECT_TRUE(a->query());
  EXPECT_TRUE(b->query());
}

TEST_P(DriverConformanceTest, DeviceSynchronizeSurvivesDestroyedQueues) {
  for (int i = 0; i < 5; ++i) {
    auto q = driver_->create_queue(0, 0);
    q->host_task([] {});
  }
  auto live = driver_->create_queue(0, 0);
  driver_->synchronize(0);
  EXPECT_TRUE(live->query());
}

// ---- executables -----------------------------------------------------------

// A shared object in the CPU drivers' executable format (host_executable.h),
// built with the compiler that built this test.
std::string build_test_executable(const std::string& source) {
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("openneuron_hal_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto stem = dir / ("kernels" + std::to_string(counter++));
  std::ofstream(stem.string() + ".cc") << source;
  const std::string cmd = std::string(OPENNEURON_TEST_CXX) + " -shared -fPIC -O1 -o " +
                          stem.string() + ".so " + stem.string() + ".cc";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("cannot build: " + cmd);
  return stem.string() + ".so";
}

// out[i] = in[i] * scalars[0] + scalars[1] for i < scalars[2]; the threads
// value is written to counter[0] so a test sees the grid arrive.
const char* kAxpbSource = R"(
#include <cstdint>
extern "C" void axpb(void** b, const int64_t* s, int64_t threads) {
  const float* in = static_cast<const float*>(b[0]);
  float* out = static_cast<float*>(b[1]);
  for (int64_t i = 0; i < s[2]; ++i) out[i] = in[i] * s[0] + s[1];
  static_cast<int64_t*>(b[2])[0] = threads;
}
extern "C" const int64_t axpb_info[5] = {3, 3, 1, 1, 1};
extern "C" void no_metadata(void**, const int64_t*, int64_t) {}
)";

#if OPENNEURON_HAL_VULKAN
// The same kernel for the Vulkan driver's ABI (spirv_executable_file.h):
// the push constant is the address of the arguments block.
const char* kAxpbGlsl = R"(#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Longs { int64_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Args {
  uint64_t bindings[3];
  int64_t scalars[3];
};
layout(push_constant) uniform Push { Args args; };
void main() {
  Floats src = Floats(args.bindings[0]);
  Floats dst = Floats(args.bindings[1]);
  const int64_t n = args.scalars[2];
  const int64_t step = int64_t(gl_NumWorkGroups.x) * 64;
  for (int64_t i = int64_t(gl_GlobalInvocationID.x); i < n; i += step)
    dst.v[uint(i)] = src.v[uint(i)] * float(args.scalars[0]) + float(args.scalars[1]);
  if (gl_GlobalInvocationID.x == 0) Longs(args.bindings[2]).v[0] = int64_t(gl_NumWorkGroups.x);
}
)";

std::string build_spirv_executable() {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("openneuron_hal_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "axpb.spvx").string();
  SpirvEntry entry;
  entry.info = EntryInfo{"axpb", 3, 3, {64, 1, 1}};
  entry.spirv = test_util::compile_glsl(kAxpbGlsl, "axpb");
  write_spirv_executable(path, {entry});
  return path;
}
#endif

class ExecutableTest : public DriverConformanceTest {
 protected:
  void SetUp() override {
    DriverConformanceTest::SetUp();
    const std::string target = driver_->properties(0).kernel_target;
    if (target == "cpp") {
      static const std::string path = build_test_executable(kAxpbSource);
      path_ = path;
      workgroup_ = {1, 1, 1};
#if OPENNEURON_HAL_VULKAN
    } else if (target == "glsl") {
      static const std::string path = build_spirv_executable();
      path_ = path;
      workgroup_ = {64, 1, 1};
#endif
    } else {
      FAIL() << "no test executable for kernel target " << target;
    }
  }
  std::string path_;
  std::array<int, 3> workgroup_{};
};

TEST_P(ExecutableTest, LoadDescribeAndDispatch) {
  auto exe = driver_->load_executable(0, path_);
  const int entry = exe->entry("axpb");
  EXPECT_EQ(exe->entry("axpb"), entry);
  const EntryInfo& info = exe->entry_info(entry);
  EXPECT_EQ(info.name, "axpb");
  EXPECT_EQ(info.bindings, 3);
  EXPECT_EQ(info.scalars, 3);
  EXPECT_EQ(info.workgroup_size, workgroup_);

  const int n = 1000;
  std::vector<float> in(n);
  std::iota(in.begin(), in.end(), 0.0f);
  auto* d_in = static_cast<char*>(driver_->allocate(0, n * 4 + 64));
  auto* d_out = static_cast<char*>(driver_->allocate(0, n * 4));
  auto* d_counter = static_cast<char*>(driver_->allocate(0, 8));
  auto queue = driver_->create_queue(0, 0);
  // Work queued before and after the dispatch runs in order around it.
  queue->copy_async(d_in + 64, in.data(), n * 4, CopyKind::HostToDevice);
  const DeviceAddress bindings[] = {d_in + 64, d_out, d_counter};
  const int64_t scalars[] = {3, 1, n};
  queue->dispatch(*exe, entry, bindings, scalars, Grid{5, 1, 1});
  std::vector<float> out(n);
  int64_t threads = 0;
  queue->copy_async(out.data(), d_out, n * 4, CopyKind::DeviceToHost);
  queue->copy_async(&threads, d_counter, 8, CopyKind::DeviceToHost);
  queue->synchronize();
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], 3.0f * i + 1.0f) << i;
  EXPECT_EQ(threads, 5);
  driver_->free(0, d_in, n * 4 + 64);
  driver_->free(0, d_out, n * 4);
  driver_->free(0, d_counter, 8);
}

TEST_P(ExecutableTest, BadEntriesAndArgumentsAreRefused) {
  auto exe = driver_->load_executable(0, path_);
  try {
    exe->entry("missing_kernel");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing_kernel"), std::string::npos) << e.what();
  }
  EXPECT_THROW(exe->entry("no_metadata"), Error);
  EXPECT_THROW(exe->entry_info(7), InvalidArgumentError);
  const int entry = exe->entry("axpb");
  void* d = driver_->allocate(0, 64);
  auto queue = driver_->create_queue(0, 0);
  const DeviceAddress two[] = {d, d};
  const DeviceAddress three[] = {d, d, d};
  const int64_t scalars[] = {1, 0, 0};
  try {
    queue->dispatch(*exe, entry, two, scalars, Grid{});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("3 bindings"), std::string::npos) << e.what();
  }
  EXPECT_THROW(queue->dispatch(*exe, entry, three, std::span<const int64_t>(scalars, 2), Grid{}),
               InvalidArgumentError);
  EXPECT_THROW(queue->dispatch(*exe, entry + 5, three, scalars, Grid{}), InvalidArgumentError);
  if (driver_->device_count() > 1) {
    auto other = driver_->create_queue(1, 0);
    EXPECT_THROW(other->dispatch(*exe, entry, three, scalars, Grid{}), InvalidArgumentError);
  }
  // Still usable.
  queue->dispatch(*exe, entry, three, scalars, Grid{});
  queue->synchronize();
  driver_->free(0, d, 64);
}

TEST_P(ExecutableTest, LoadErrorsNameThePath) {
  try {
    driver_->load_executable(0, "/nonexistent/kernels.so");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/kernels.so"), std::string::npos);
  }
  EXPECT_THROW(driver_->load_executable(driver_->device_count(), path_), InvalidDeviceError);
}

INSTANTIATE_TEST_SUITE_P(Drivers, ExecutableTest, ::testing::ValuesIn(driver_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

INSTANTIATE_TEST_SUITE_P(Drivers, DriverConformanceTest,
                         ::testing::ValuesIn(driver_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(DriverRegistryTest, KnowsHostDriver) {
  auto names = driver_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "host"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "protected"), names.end());
}

TEST(DriverRegistryTest, UnknownDriverListsKnownOnes) {
  try {
    create_driver("warp-drive");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("warp-drive"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'host'"), std::string::npos) << msg;
  }
}

TEST(DriverRegistryTest, ProcessDriverFollowsConfig) {
  EXPECT_EQ(driver().name(), config().driver);
  EXPECT_EQ(&driver(), &driver());
}

}  // namespace
}  // namespace openneuron::hal
