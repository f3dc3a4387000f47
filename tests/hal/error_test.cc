// Messages users see: they must keep their exact shape.
#include "hal/error.h"

#include <gtest/gtest.h>

#include "hal/types.h"

namespace openneuron::hal {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

TEST(ErrorTest, InvalidDeviceMessage) {
  InvalidDeviceError error(7, 4);
  EXPECT_STREQ(error.what(),
               "Invalid device index 7: there are 4 OpenNeuron devices (valid "
               "indices 0..3). Set OPENNEURON_HOST_DEVICES to change the "
               "count.");
  EXPECT_EQ(error.device(), 7);
  EXPECT_EQ(error.device_count(), 4);
}

TEST(ErrorTest, InvalidDeviceMessageSingleDevice) {
  InvalidDeviceError error(-1, 1);
  EXPECT_STREQ(error.what(),
               "Invalid device index -1: there is 1 OpenNeuron device (valid "
               "index 0). Set OPENNEURON_HOST_DEVICES to change the count.");
}

TEST(ErrorTest, OutOfMemoryMessage) {
  OutOfMemoryError error(0, 2 * kGiB, kGiB, 12 * kMiB, 20 * kMiB,
                         "the 4 host devices share 1.00 GiB "
                         "(OPENNEURON_HOST_DEVICE_MEMORY), 3.00 MiB of it free");
  EXPECT_STREQ(error.what(),
               "OpenNeuron out of memory on device 0: tried to allocate 2.00 "
               "GiB; 12.00 MiB allocated by PyTorch and 20.00 MiB reserved on "
               "this device; the 4 host devices share 1.00 GiB "
               "(OPENNEURON_HOST_DEVICE_MEMORY), 3.00 MiB of it free. Free "
               "tensors, call torch.neuron.empty_cache(), or raise that "
               "limit.");
  EXPECT_EQ(error.device(), 0);
  EXPECT_EQ(error.requested(), 2 * kGiB);
  EXPECT_EQ(error.capacity(), kGiB);
  EXPECT_EQ(error.allocated(), 12 * kMiB);
  EXPECT_EQ(error.reserved(), 20 * kMiB);
}

TEST(ErrorTest, ErrorsAreCatchableAsBase) {
  EXPECT_THROW(throw InvalidDeviceError(1, 1), Error);
  EXPECT_THROW(throw OutOfMemoryError(0, 1, 1, 0, 0, "a limit"), Error);
  EXPECT_THROW(throw InvalidArgumentError("x"), Error);
  EXPECT_THROW(throw Error("x"), std::runtime_error);
}

TEST(ErrorTest, FormatBytes) {
  EXPECT_EQ(format_bytes(0), "0 bytes");
  EXPECT_EQ(format_bytes(1), "1 byte");
  EXPECT_EQ(format_bytes(1023), "1023 bytes");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(12 * kMiB), "12.00 MiB");
  EXPECT_EQ(format_bytes(kGiB + kGiB / 2), "1.50 GiB");
  EXPECT_EQ(format_bytes(size_t{3} << 40), "3.00 TiB");
}

TEST(TypesTest, CopyKindNames) {
  EXPECT_STREQ(to_string(CopyKind::HostToDevice), "HostToDevice");
  EXPECT_STREQ(to_string(CopyKind::DeviceToHost), "DeviceToHost");
  EXPECT_STREQ(to_string(CopyKind::DeviceToDevice), "DeviceToDevice");
}

}  // namespace
}  // namespace openneuron::hal
