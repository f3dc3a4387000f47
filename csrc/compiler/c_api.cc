// A C ABI over the compiler, for the Python front end (ctypes): the compiler
// library stays free of PyTorch and of Python headers.
#include <cstdlib>
#include <cstring>
#include <string>

#include "compiler/compile.h"
#include "compiler/ir/errors.h"
#include "compiler/ir/json.h"

namespace {

char* copy_out(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

std::string error_json(const char* type, const char* message) {
  using openneuron::compiler::Json;
  Json j = Json::object();
  j.set("error", Json::string(type));
  j.set("message", Json::string(message));
  return j.dump();
}

}  // namespace

extern "C" {

// Returns the plan JSON, or {"error": "unsupported"|"compile"|"internal",
// "message": ...}; the caller frees the string with openneuron_free.
char* openneuron_compile(const char* graph_json, const char* options_json) {
  using namespace openneuron::compiler;
  try {
    return copy_out(compile_graph(graph_json, options_json ? options_json : ""));
  } catch (const UnsupportedError& e) {
    return copy_out(error_json("unsupported", e.what()));
  } catch (const CompileError& e) {
    return copy_out(error_json("compile", e.what()));
  } catch (const std::exception& e) {
    return copy_out(error_json("internal", e.what()));
  }
}

// Returns find_kernel_library's JSON, or {"error": "internal", "message": ...}
// (an unusable cache directory); the caller frees it with openneuron_free.
char* openneuron_find_kernel_library(const char* source_digest, const char* options_json) {
  using namespace openneuron::compiler;
  try {
    return copy_out(find_kernel_library(source_digest, options_json ? options_json : ""));
  } catch (const std::exception& e) {
    return copy_out(error_json("internal", e.what()));
  }
}

void openneuron_free(char* p) { std::free(p); }

}  // extern "C"
