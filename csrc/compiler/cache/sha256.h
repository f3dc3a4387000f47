// SHA-256 (FIPS 180-4), self-contained so the compiler needs no crypto library.
// Used for content keys and for verifying cached artifacts, not for security.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace openneuron::compiler {

// Streaming hasher: update() any number of times, then read the digest.
// digest()/hex_digest() do not consume the state, so hashing may continue.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  std::array<uint8_t, 32> digest() const;
  std::string hex_digest() const;  // 64 lowercase hex digits

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view data);

// Hashes a whole file. Throws std::system_error naming the path on open/read errors.
std::string sha256_file_hex(const std::string& path);

// Hashes from an open descriptor's current offset to EOF; sets *bytes to the
// count read if non-null. Throws std::system_error on read errors.
std::string sha256_fd_hex(int fd, uint64_t* bytes = nullptr);

}  // namespace openneuron::compiler
