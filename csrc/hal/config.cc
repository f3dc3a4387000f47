#include "hal/config.h"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "hal/error.h"

namespace openneuron::hal {
namespace {

constexpr int kMaxHostDevices = 64;

std::string trim(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin])))
    ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1])))
    --end;
  return text.substr(begin, end - begin);
}

std::string lower(std::string text) {
  for (char& c : text)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

[[noreturn]] void bad_bytes(const std::string& text, const char* variable) {
  throw Error(std::string("Invalid value for ") +
              (variable ? variable : "byte count") + ": '" + text +
              "' (expected a byte count such as 512, 64MiB, 8GB or 1.5GiB)");
}

// Binary multiples for every spelling: memory sizes are meant, so "8GB" is
// 8 GiB, like Docker's and the JVM's memory flags.
std::optional<uint64_t> suffix_multiplier(const std::string& suffix) {
  if (suffix.empty() || suffix == "b") return 1;
  static const char kPrefixes[] = "kmgtpe";
  std::string unit = suffix;
  if (unit.size() == 3 && unit.substr(1) == "ib") {
    unit.resize(1);
  } else if (unit.size() == 2 && unit[1] == 'b') {
    unit.resize(1);
  }
  if (unit.size() != 1) return std::nullopt;
  uint64_t multiplier = 1;
  for (const char* p = kPrefixes; *p; ++p) {
    multiplier *= 1024;
    if (*p == unit[0]) return multiplier;
  }
  return std::nullopt;
}

std::optional<std::string> get_env(const char* name) {
  const char* value = std::getenv(name);
  // An empty variable counts as unset, as with most tools.
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

int parse_device_count(const std::string& text) {
  std::string t = trim(text);
  int value = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() ||
      value < 1 || value > kMaxHostDevices) {
    throw Error("Invalid value for OPENNEURON_HOST_DEVICES: '" + text +
                "' (expected an integer from 1 to " +
                std::to_string(kMaxHostDevices) + ")");
  }
  return value;
}

// "1,0,2" -> {1, 0, 2}: non-negative indices. One may repeat: each is a
// device of its own over the same hardware (CI's multi-device tests on one
// lavapipe).
std::vector<int> parse_index_list(const std::string& text, const char* variable) {
  std::vector<int> indices;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = trim(text.substr(begin, end - begin));
    int value = -1;
    auto [last, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || last != item.data() + item.size() || value < 0) {
      throw Error(std::string("Invalid value for ") + variable + ": '" + text +
                  "' (expected device indices such as 0 or 1,0)");
    }
    indices.push_back(value);
    begin = end + 1;
  }
  return indices;
}

// 80% of physical RAM, shared by all host devices: what they may hold
// together (pages are only committed when touched).
size_t default_device_memory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return size_t{4} << 30;  // unknown: 4 GiB
  return static_cast<size_t>(pages) / 5 * 4 * static_cast<size_t>(page_size);
}

Config load_config() {
  Config config;
  if (auto v = get_env("OPENNEURON_DRIVER")) config.driver = trim(*v);
  if (auto v = get_env("OPENNEURON_HOST_DEVICES")) {
    config.host_device_count = parse_device_count(*v);
  }
  if (auto v = get_env("OPENNEURON_HOST_DEVICE_MEMORY")) {
    config.host_device_memory =
        parse_bytes(*v, "OPENNEURON_HOST_DEVICE_MEMORY");
  }
  if (config.host_device_memory == 0) {
    config.host_device_memory = default_device_memory();
  }
  if (auto v = get_env("OPENNEURON_VULKAN_DEVICES")) {
    config.vulkan_devices = parse_index_list(*v, "OPENNEURON_VULKAN_DEVICES");
  }
  if (auto v = get_env("OPENNEURON_VULKAN_VALIDATION")) config.vulkan_validation = trim(*v) != "0";
  if (auto v = get_env("OPENNEURON_VULKAN_FP64")) config.vulkan_fp64 = trim(*v) != "0";
  if (auto v = get_env("OPENNEURON_VULKAN_TILED_KERNELS")) {
    const std::string t = trim(*v);
    if (t != "0" && t != "1")
      throw Error("Invalid value for OPENNEURON_VULKAN_TILED_KERNELS: '" + t + "' (expected 0 or 1)");
    config.vulkan_tiled_kernels = t == "1";
  }
  if (auto v = get_env("OPENNEURON_VULKAN_MATRIX_UNITS")) {
    const std::string t = trim(*v);
    if (t != "0" && t != "1" && t != "emulate")
      throw Error("Invalid value for OPENNEURON_VULKAN_MATRIX_UNITS: '" + t + "' (expected 0, 1 or emulate)");
    config.vulkan_matrix_units = t;
  }
  const auto cache = get_env("OPENNEURON_COMPILE_CACHE");
  if (!cache || trim(*cache) != "0") {
    if (auto dir = get_env("OPENNEURON_COMPILE_CACHE_DIR")) {
      config.vulkan_pipeline_cache_dir = *dir;
    } else {
      const auto xdg = get_env("XDG_CACHE_HOME");
      const auto home = get_env("HOME");
      if (xdg || home)
        config.vulkan_pipeline_cache_dir = (xdg ? *xdg : *home + "/.cache") + "/openneuron/kernels";
    }
  }
  return config;
}

}  // namespace

const Config& config() {
  // A throwing initializer leaves the static uninitialized, so the next call
  // reports the error again instead of using half-read settings.
  static const Config instance = load_config();
  return instance;
}

size_t parse_bytes(const std::string& text, const char* variable) {
  const std::string t = trim(text);
  size_t pos = 0;
  uint64_t integer = 0;
  size_t int_digits = 0;
  while (pos < t.size() && std::isdigit(static_cast<unsigned char>(t[pos]))) {
    unsigned digit = t[pos] - '0';
    if (integer > (std::numeric_limits<uint64_t>::max() - digit) / 10)
      bad_bytes(text, variable);
    integer = integer * 10 + digit;
    ++pos;
    ++int_digits;
  }
  std::string fraction;
  if (pos < t.size() && t[pos] == '.') {
    ++pos;
    while (pos < t.size() && std::isdigit(static_cast<unsigned char>(t[pos])))
      fraction += t[pos++];
    if (fraction.empty()) bad_bytes(text, variable);
  }
  if (int_digits == 0 && fraction.empty()) bad_bytes(text, variable);
  while (pos < t.size() && t[pos] == ' ') ++pos;  // "64 MiB"
  auto multiplier = suffix_multiplier(lower(t.substr(pos)));
  if (!multiplier) bad_bytes(text, variable);

  // Integer part exactly; the fraction in floating point, rounded down.
  if (integer != 0 &&
      *multiplier > std::numeric_limits<uint64_t>::max() / integer) {
    bad_bytes(text, variable);
  }
  uint64_t bytes = integer * *multiplier;
  if (!fraction.empty()) {
    // Digit by digit rather than stold, which depends on the C locale.
    long double frac = 0, scale = 1;
    for (char c : fraction) {
      scale /= 10;
      frac += (c - '0') * scale;
    }
    frac *= *multiplier;
    uint64_t extra = static_cast<uint64_t>(std::floor(frac));
    if (extra > std::numeric_limits<uint64_t>::max() - bytes)
      bad_bytes(text, variable);
    bytes += extra;
  }
  if (bytes > std::numeric_limits<size_t>::max()) bad_bytes(text, variable);
  return static_cast<size_t>(bytes);
}

}  // namespace openneuron::hal
