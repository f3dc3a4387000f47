// A graph's generated code, built once per distinct kernel. Kernels are
// named by their content, so identical layers give one kernel; each is
// looked up on its own in the persistent cache (a kernel another graph or
// process built is not built again), and the rest are built in batches, in
// parallel on the machine's cores.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "compiler/cache/kernel_cache.h"
#include "compiler/codegen/target.h"

namespace openneuron::compiler {

// One built library of a graph: its source's digest (how a saved graph finds
// it again, find_kernel_library) and its path in the cache.
struct BuiltLibrary {
  std::string source_digest;
  std::string path;
  bool hit = false;  // found in the cache
  std::string miss_reason;
};

struct KernelBuilds {
  std::vector<BuiltLibrary> libraries;
  std::map<std::string, int> library_of;  // entry point -> index into libraries
  // Distinct kernels compiled by this call, and found in the cache (a
  // kernel both in the launch library and on its own counts once).
  int kernels_built = 0;
  int kernels_found = 0;
  std::string miss_reason;  // the first missing kernel's, empty when all were found
};

// The kernel cache key of a library built from a source with this digest.
CacheKey library_cache_key(const std::string& source_digest, const Target& target);

// Renames a kernel generated under the entry name `placeholder` after its
// content ("on_k" and the source's digest): equal kernels get equal names.
void name_by_content(GeneratedKernel& kernel, const std::string& placeholder);

// Combined launches: their source with the kernels they call, built as one
// library of their own.
struct LaunchLibrary {
  std::string source;  // empty: no combined launches
  std::vector<std::string> names;
  int only_kernels = 0;  // distinct kernels nothing launches on its own
};

// Builds `kernels` (distinct, content-named, launched on their own) and the
// launch library; at most `threads` builds run at once.
KernelBuilds build_kernels(const Target& target, KernelCache& cache, const std::vector<GeneratedKernel>& kernels,
                           const LaunchLibrary& launches, int threads);

}  // namespace openneuron::compiler
