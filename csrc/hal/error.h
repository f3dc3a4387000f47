// Typed errors raised by the HAL. Every message says what failed and on which
// device, so the layers above can pass it to the user unchanged.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace openneuron::hal {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A device index outside [0, device_count).
class InvalidDeviceError : public Error {
 public:
  InvalidDeviceError(int device, int device_count);
  int device() const { return device_; }
  int device_count() const { return device_count_; }

 private:
  int device_;
  int device_count_;
};

// A request the device cannot satisfy even after the cache was released.
class OutOfMemoryError : public Error {
 public:
  // `limit`: what bounded the device, in words, with the setting that
  // changes it ("the 4 host devices share 18.80 GiB
  // (OPENNEURON_HOST_DEVICE_MEMORY), 1.20 GiB of it free").
  OutOfMemoryError(int device, size_t requested, size_t capacity,
                   size_t allocated, size_t reserved, const std::string& limit);
  int device() const { return device_; }
  size_t requested() const { return requested_; }
  size_t capacity() const { return capacity_; }
  size_t allocated() const { return allocated_; }
  size_t reserved() const { return reserved_; }

 private:
  int device_;
  size_t requested_, capacity_, allocated_, reserved_;
};

// Wrong use of the API (a pointer the allocator does not own, ...).
class InvalidArgumentError : public Error {
 public:
  using Error::Error;
};

// Formats a byte count the way users read it: "1.50 GiB".
std::string format_bytes(size_t bytes);

}  // namespace openneuron::hal
