// parse_bytes and the settings read from the environment. The cached
// config() is read once per process, so parsing is tested directly.
#include "hal/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "hal/error.h"

namespace openneuron::hal {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;
constexpr size_t kTiB = size_t{1} << 40;

size_t parse(const std::string& text) { return parse_bytes(text, "VAR"); }

TEST(ParseBytesTest, PlainIntegers) {
  EXPECT_EQ(parse("0"), 0u);
  EXPECT_EQ(parse("512"), 512u);
  EXPECT_EQ(parse("17179869184"), 16 * kGiB);
  EXPECT_EQ(parse("  4096 "), 4096u);
}

TEST(ParseBytesTest, SuffixesAreBinaryAndCaseInsensitive) {
  EXPECT_EQ(parse("1B"), 1u);
  EXPECT_EQ(parse("1K"), kKiB);
  EXPECT_EQ(parse("1KB"), kKiB);
  EXPECT_EQ(parse("1KiB"), kKiB);
  EXPECT_EQ(parse("64M"), 64 * kMiB);
  EXPECT_EQ(parse("64MB"), 64 * kMiB);
  EXPECT_EQ(parse("64MiB"), 64 * kMiB);
  EXPECT_EQ(parse("64mib"), 64 * kMiB);
  EXPECT_EQ(parse("64mb"), 64 * kMiB);
  EXPECT_EQ(parse("8GB"), 8 * kGiB);
  EXPECT_EQ(parse("8g"), 8 * kGiB);
  EXPECT_EQ(parse("8GiB"), 8 * kGiB);
  EXPECT_EQ(parse("2T"), 2 * kTiB);
  EXPECT_EQ(parse("2TB"), 2 * kTiB);
  EXPECT_EQ(parse("2TiB"), 2 * kTiB);
  EXPECT_EQ(parse("64 MiB"), 64 * kMiB);
}

TEST(ParseBytesTest, Decimals) {
  EXPECT_EQ(parse("1.5GiB"), kGiB + kGiB / 2);
  EXPECT_EQ(parse("0.5K"), 512u);
  EXPECT_EQ(parse(".25MiB"), kMiB / 4);
  EXPECT_EQ(parse("2.0"), 2u);
  EXPECT_EQ(parse("1.75 gb"), kGiB + 3 * kGiB / 4);
}

TEST(ParseBytesTest, RejectsBadValues) {
  for (const char* bad :
       {"", "  ", "abc", "-1", "+5", "1.5.5", "12XB", "1.", ".", "1e3", "MiB",
        "1 2", "1KiBB", "0x10", "99999999999999999999", "100000000000T"}) {
    EXPECT_THROW(parse(bad), Error) << "value: '" << bad << "'";
  }
}

TEST(ParseBytesTest, ErrorNamesVariableAndValue) {
  try {
    parse_bytes("12XB", "OPENNEURON_HOST_DEVICE_MEMORY");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("OPENNEURON_HOST_DEVICE_MEMORY"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("'12XB'"), std::string::npos) << msg;
  }
}

TEST(ConfigTest, ValuesAreValid) {
  const Config& c = config();
  EXPECT_FALSE(c.driver.empty());
  EXPECT_GE(c.host_device_count, 1);
  EXPECT_LE(c.host_device_count, 64);
  EXPECT_GT(c.host_device_memory, 0u);
  EXPECT_EQ(&c, &config());  // read once
}

// config() is read once per process, so each case runs in a fresh child
// process (the "threadsafe" death-test style re-executes the test binary).
// The child exits 3 with the message on stderr when config() throws, or
// prints the parsed values and exits 0.
void load_config_in_child(const char* devices, const char* memory) {
  if (devices) setenv("OPENNEURON_HOST_DEVICES", devices, 1);
  if (memory) setenv("OPENNEURON_HOST_DEVICE_MEMORY", memory, 1);
  try {
    const Config& c = config();
    std::fprintf(stderr, "devices=%d memory=%zu\n", c.host_device_count,
                 c.host_device_memory);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(3);
  }
  std::exit(0);
}

class ConfigDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(ConfigDeathTest, ReadsValidValues) {
  EXPECT_EXIT(load_config_in_child("3", "64MiB"), ::testing::ExitedWithCode(0),
              "devices=3 memory=67108864");
}

TEST_F(ConfigDeathTest, RejectsDeviceCountOutOfRange) {
  EXPECT_EXIT(load_config_in_child("0", nullptr), ::testing::ExitedWithCode(3),
              "OPENNEURON_HOST_DEVICES.*'0'");
  EXPECT_EXIT(load_config_in_child("65", nullptr), ::testing::ExitedWithCode(3),
              "OPENNEURON_HOST_DEVICES.*'65'");
  EXPECT_EXIT(load_config_in_child("two", nullptr),
              ::testing::ExitedWithCode(3), "OPENNEURON_HOST_DEVICES.*'two'");
}

TEST_F(ConfigDeathTest, RejectsBadMemory) {
  EXPECT_EXIT(load_config_in_child(nullptr, "lots"),
              ::testing::ExitedWithCode(3),
              "OPENNEURON_HOST_DEVICE_MEMORY.*'lots'");
}

}  // namespace
}  // namespace openneuron::hal
