// The system C++ compiler that turns generated kernel sources into shared
// objects, and the facts about it and this CPU that belong in cache keys.
#pragma once

#include <string>

namespace openneuron::compiler {

struct Toolchain {
  std::string cxx = "g++";
  std::string flags;        // everything but -o and the file names
  std::string version;      // first line of `cxx --version`
  std::string cpu_features; // SIMD features of this CPU, sorted
};

// Reads OPENNEURON_CXX (default g++) and probes it once per process.
const Toolchain& toolchain();
// Compiles `source` into a shared object at `output`; throws CompileError
// with the compiler's messages on failure.
void compile_shared_object(const std::string& source, const std::string& output);

}  // namespace openneuron::compiler
