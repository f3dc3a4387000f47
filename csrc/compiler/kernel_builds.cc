#include "compiler/kernel_builds.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "compiler/cache/sha256.h"
#include "compiler/compile.h"
#include "compiler/ir/errors.h"

namespace openneuron::compiler {

namespace {

// Fewer kernels than this per batch would pay the prelude's compile (about
// six small kernels' worth with g++) more often than parallel builds gain.
constexpr size_t kMinKernelsPerBatch = 8;

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// The key of "kernel K lives in library L": an entry whose artifact is L's
// source digest. The prelude is part of it: L was built with one.
CacheKey kernel_alias_key(const GeneratedKernel& kernel, const Target& target, const std::string& prelude_digest) {
  CacheKey key = library_cache_key(sha256_hex(kernel.source), target);
  key.parts.front().first = "kernel";
  key.parts.emplace_back("prelude", prelude_digest);
  return key;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs the jobs, at most `threads` at a time; rethrows the first failure
// once all have finished.
void run_parallel(const std::vector<std::function<void()>>& jobs, int threads) {
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(jobs.size());
  auto worker = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      try {
        jobs[i]();
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(jobs.size(), static_cast<size_t>(std::max(1, threads))); ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

CacheKey library_cache_key(const std::string& source_digest, const Target& target) {
  CacheKey key;
  key.parts = {{"ir", source_digest}, {"codegen", kCodegenVersion}, {"target", target.name()}};
  for (auto& part : target.cache_key_parts()) key.parts.push_back(part);
  return key;
}

void name_by_content(GeneratedKernel& kernel, const std::string& placeholder) {
  const std::string name = "on_k" + sha256_hex(kernel.source).substr(0, 24);
  replace_all(kernel.source, placeholder, name);
  kernel.name = name;
}

KernelBuilds build_kernels(const Target& target, KernelCache& cache, const std::vector<GeneratedKernel>& kernels,
                           const LaunchLibrary& launches, int threads) {
  KernelBuilds out;
  auto add_library = [&](const std::string& digest, const CacheResult& r) {
    for (size_t i = 0; i < out.libraries.size(); ++i)
      if (out.libraries[i].source_digest == digest) return static_cast<int>(i);
    out.libraries.push_back({digest, r.path, r.hit, r.miss_reason});
    return static_cast<int>(out.libraries.size()) - 1;
  };

  // Kernels an earlier build put in the cache, each with its library (each
  // library looked up, and so verified, once).
  const std::string prelude_digest = sha256_hex(target.prelude());
  std::map<std::string, CacheResult> found_libraries;
  std::vector<const GeneratedKernel*> missing;
  for (const GeneratedKernel& k : kernels) {
    CacheResult alias = cache.find(kernel_alias_key(k, target, prelude_digest));
    if (alias.hit) {
      const std::string digest = read_file(alias.path);
      auto found = found_libraries.find(digest);
      if (found == found_libraries.end())
        found = found_libraries.emplace(digest, cache.find(library_cache_key(digest, target))).first;
      const CacheResult& lib = found->second;
      if (lib.hit) {
        out.library_of[k.name] = add_library(digest, lib);
        ++out.kernels_found;
        continue;
      }
      alias.miss_reason = "its library " + digest.substr(0, 12) + "... is gone: " + lib.miss_reason;
    }
    if (out.miss_reason.empty()) out.miss_reason = "kernel " + k.name + ": " + alias.miss_reason;
    missing.push_back(&k);
  }

  // The others in batches (by name, so the same kernels make the same
  // batches), built in parallel with the combined launches' library.
  std::sort(missing.begin(), missing.end(), [](auto* a, auto* b) { return a->name < b->name; });
  const size_t batches = std::clamp<size_t>(missing.size() / kMinKernelsPerBatch, missing.empty() ? 0 : 1,
                                            static_cast<size_t>(std::max(1, threads)));
  std::vector<std::string> sources(batches, target.prelude());
  for (size_t i = 0; i < missing.size(); ++i) sources[i * batches / missing.size()] += "\n" + missing[i]->source;
  if (!launches.source.empty()) sources.push_back(target.prelude() + "\n" + launches.source);
  std::vector<std::string> digests;
  for (const std::string& source : sources) digests.push_back(sha256_hex(source));
  std::vector<CacheResult> built(sources.size());
  std::vector<std::function<void()>> jobs;
  for (size_t b = 0; b < sources.size(); ++b)
    jobs.push_back([&, b] {
      built[b] = cache.get_or_build(library_cache_key(digests[b], target),
                                    [&](const std::string& tmp) { target.build(sources[b], tmp); });
    });
  run_parallel(jobs, threads);

  for (size_t i = 0; i < missing.size(); ++i) {
    const size_t b = i * batches / missing.size();
    out.library_of[missing[i]->name] = add_library(digests[b], built[b]);
    out.kernels_built += !built[b].hit;
    out.kernels_found += built[b].hit;
    if (cache.enabled())  // where later graphs find it
      cache.get_or_build(kernel_alias_key(*missing[i], target, prelude_digest), [&](const std::string& tmp) {
        std::ofstream f(tmp, std::ios::binary);
        f << digests[b];
        if (!f) throw CompileError("cannot write kernel cache entry " + tmp);
      });
  }
  if (!launches.source.empty()) {
    const int index = add_library(digests.back(), built.back());
    for (const std::string& name : launches.names) out.library_of[name] = index;
    (built.back().hit ? out.kernels_found : out.kernels_built) += launches.only_kernels;
    if (!built.back().hit && out.miss_reason.empty()) out.miss_reason = "combined launches: " + built.back().miss_reason;
  }
  return out;
}

}  // namespace openneuron::compiler
