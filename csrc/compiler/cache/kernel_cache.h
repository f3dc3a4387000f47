// Persistent, multi-process cache of compiled kernels (shared objects).
//
// On-disk layout, for a key whose digest is D (64 lowercase hex digits):
//   <dir>/D.so     the artifact, exactly as the build wrote it
//   <dir>/D.meta   text; first line "# openneuron kernel cache entry v1", then one
//                  "name=value" line per key part in key order, then
//                  "artifact_sha256=<hex>" and "artifact_bytes=<n>" as the last two
//                  lines. Bytes < 0x20, 0x7f and '\' are escaped as \xHH / \\ (and
//                  '=' too in names), so no value can break a line.
//                  Its mtime is the entry's last use (LRU).
//   <dir>/D.lock   flock(2) target serializing check-build-publish of D
//   <dir>/.evict.lock  flock(2) target serializing eviction
//   <dir>/D.tmp-<pid>-<n>.{so,meta}  files being written; renamed into place
//
// An entry exists once D.meta exists: the artifact is renamed into place first,
// the meta last, so a reader never sees a half-written entry. Every lookup
// re-hashes the artifact against the meta; anything inconsistent is deleted and
// rebuilt. Lock files are only deleted by eviction, while held; lockers re-check
// the inode after locking, so a deleted lock file cannot split the lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace openneuron::compiler {

// A filesystem failure of the cache; the message names the path and errno text.
class CacheError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A cache key is content only: named parts in a fixed order, e.g.
// {"ir", "<sha of the kernel source/IR>"}, {"codegen", "1"}, {"compiler", "g++ 12.2.0"},
// {"flags", "-O3 -march=native ..."}, {"cpu", "avx2 fma avx512f ..."}.
// Never paths, host names or times.
struct CacheKey {
  std::vector<std::pair<std::string, std::string>> parts;
  // sha256 hex of the length-prefixed parts: order and names matter, and no two
  // different part lists serialize alike.
  std::string digest() const;
};

struct CacheOptions {
  std::string directory;            // created if missing (mkdir -p)
  uint64_t max_bytes = 1ull << 30;  // size cap over all artifacts
  bool enabled = true;  // false: build every time into a private temp dir, never touch `directory`
  // Name the nearest entry in a miss reason. Reads every entry's meta, so
  // callers that never show the reason (eager per-op kernels) turn it off.
  bool explain_misses = true;
};

struct CacheResult {
  std::string path;  // the artifact to load (inside the cache directory)
  bool hit = false;
  // Empty on a hit. On a miss: "cache empty", "cache disabled", "no entry
  // for this key" (explain_misses off),
  // "corrupt entry rebuilt: <why>", or "no entry for this key; nearest entry
  // 3fa2c1d0... differs in: ir (9c1e.. vs 77ab..), flags (-O2 vs -O3)" where each
  // pair is (nearest entry's value vs requested value).
  std::string miss_reason;
};

// Thread-safe; many processes may share one directory.
class KernelCache {
 public:
  using BuildFn = std::function<void(const std::string& tmp_path)>;

  explicit KernelCache(CacheOptions options);
  ~KernelCache();  // removes the private temp dir of a disabled cache
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // Returns a valid artifact for `key`, calling `build(tmp_path)` on a miss; build
  // writes the artifact file at tmp_path (a fresh path inside the cache directory)
  // or throws. A throwing build propagates and leaves only D.lock behind.
  // With the cache disabled, the path lives in a private temp dir that is removed
  // when this KernelCache is destroyed.
  CacheResult get_or_build(const CacheKey& key, const BuildFn& build);

  // The valid artifact for `key`, built by an earlier get_or_build, without
  // building: a hit, or a miss with an empty path and the reason ("cache
  // disabled", "corrupt entry: <why>", or as get_or_build's). Counts hits
  // only, and removes nothing: the get_or_build that follows a miss counts
  // it, and rebuilds a corrupt entry.
  CacheResult find(const CacheKey& key);

  // False for a cache that builds every time (CacheOptions::enabled).
  bool enabled() const { return options_.enabled; }

  // Evicts least-recently-used entries until the total artifact size <= max_bytes.
  // Entries locked by another builder/reader are skipped.
  void enforce_size_cap();

  struct Stats {
    uint64_t hits = 0, misses = 0, corrupt_rebuilt = 0, evicted = 0;
  };
  // Counts of this object's calls; misses include corrupt rebuilds.
  Stats stats() const;

 private:
  CacheResult hit(const std::string& base);
  CacheResult build_uncached(const std::string& digest, const BuildFn& build);
  // Returns the total artifact bytes left.
  uint64_t evict(const std::string& keep_digest);
  void evict_if_due(const std::string& keep_digest, uint64_t added_bytes);
  std::string describe_miss(const CacheKey& key, const std::string& digest) const;
  std::string entry_base(const std::string& digest) const;

  CacheOptions options_;
  std::atomic<uint64_t> hits_{0}, misses_{0}, corrupt_rebuilt_{0}, evicted_{0};
  std::mutex private_dir_mutex_;
  std::string private_dir_;  // disabled cache only, created on first use
  int private_dir_owner_ = 0;  // pid that created it: a forked child must not remove it
  // Eviction scans the whole directory, so a publish scans only when this
  // object's estimate of the total passes the cap, or every kRescanPublishes
  // publishes (other processes add entries too).
  std::mutex evict_mutex_;
  // Key parts of the entries seen by describe_miss, so that each meta is read
  // once per process rather than once per miss.
  struct SeenEntry {
    std::vector<std::pair<std::string, std::string>> parts;
    int64_t used_ns = 0;  // the meta's mtime when first read
  };
  mutable std::mutex seen_mutex_;
  mutable std::map<std::string, SeenEntry> seen_;
  bool scanned_ = false;
  uint64_t estimated_bytes_ = 0;
  uint64_t publishes_since_scan_ = 0;
};

}  // namespace openneuron::compiler
