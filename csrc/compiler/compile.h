// The compiler's entry point: a serialized FX graph in, a plan out. The plan
// (JSON) lists the steps the runtime performs: generated kernels (each with
// its library from the kernel cache, plan["libraries"]), extern library calls,
// views, and when each buffer is allocated, reused and freed.
#pragma once

#include <string>

namespace openneuron::compiler {

// Options (JSON): {"cache_dir": str, "cache_max_bytes": int,
// "cache_enabled": bool, "cache_explain_misses": bool (default true), "debug": bool,
// "build_threads": int (builds at once; default: the machine's cores)}.
// Throws UnsupportedError when the graph cannot be compiled at all, and
// CompileError for broken input or toolchain failures.
std::string compile_graph(const std::string& graph_json, const std::string& options_json);

// The kernel library that compile_graph built from a source whose digest is
// `source_digest` (one of its plan's libraries), looked up in the kernel
// cache under this machine's toolchain without lowering or building anything:
// {"hit": true, "library": path, "key": digest} or {"hit": false,
// "miss_reason": why, ...}. Options as compile_graph's (cache_* only).
std::string find_kernel_library(const std::string& source_digest, const std::string& options_json);

// The target's kernel library (codegen/target.h, library_source), built
// once into the kernel cache: {"library": path} or {"library": null} for a
// target without one. Options as compile_graph's ("target", cache_*).
std::string kernel_library(const std::string& options_json);

// Bumped whenever generated code changes meaning: part of every cache key.
constexpr const char* kCodegenVersion = "2";

}  // namespace openneuron::compiler
