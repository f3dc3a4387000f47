// The contract every driver must meet. The suite runs once per registered
// driver name; a new driver passes it before the layers above may use it.
#include <gtest/gtest.h>

#include <algorithm>
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
    EXPECT_GE(props.compute_units, 1);
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

INSTANTIATE_TEST_SUITE_P(Drivers, DriverConformanceTest,
                         ::testing::ValuesIn(driver_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(DriverRegistryTest, KnowsHostDriver) {
  auto names = driver_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "host"), names.end());
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
