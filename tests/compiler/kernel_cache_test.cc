#include "compiler/cache/kernel_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "compiler/cache/sha256.h"

namespace openneuron::compiler {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_all(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

std::set<std::string> listing(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

CacheKey make_key(const std::string& ir, const std::string& flags = "-O3 -march=native") {
  return CacheKey{{{"ir", sha256_hex(ir)}, {"codegen", "1"}, {"compiler", "g++ 12.2.0"}, {"flags", flags}}};
}

// Sets a file's mtime to `seconds_ago` in the past.
void age(const std::string& path, int seconds_ago) {
  timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds_ago;
  times[1] = times[0];
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kernel_cache_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
    dir_ = root_ + "/cache/nested";  // exercises mkdir -p
  }
  void TearDown() override { fs::remove_all(root_); }

  CacheOptions options(uint64_t max_bytes = 1ull << 30) const { return {dir_, max_bytes, true}; }

  // A build that writes `content` and counts its calls.
  KernelCache::BuildFn writer(const std::string& content) {
    return [this, content](const std::string& tmp) {
      ++builds_;
      write_all(tmp, content);
    };
  }

  std::string root_, dir_;
  int builds_ = 0;
};

TEST_F(KernelCacheTest, HitAfterMiss) {
  KernelCache cache(options());
  const CacheKey key = make_key("kernel A");
  const CacheResult first = cache.get_or_build(key, writer("artifact A"));
  EXPECT_FALSE(first.hit);
  EXPECT_EQ(first.miss_reason, "cache empty");
  EXPECT_EQ(first.path, dir_ + "/" + key.digest() + ".so");
  EXPECT_EQ(read_all(first.path), "artifact A");

  const CacheResult second = cache.get_or_build(key, writer("unused"));
  EXPECT_TRUE(second.hit);
  EXPECT_EQ(second.miss_reason, "");
  EXPECT_EQ(second.path, first.path);
  EXPECT_EQ(read_all(second.path), "artifact A");
  EXPECT_EQ(builds_, 1);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);

  const std::string meta = read_all(dir_ + "/" + key.digest() + ".meta");
  EXPECT_NE(meta.find("\nir=" + sha256_hex("kernel A") + "\n"), std::string::npos) << meta;
  EXPECT_NE(meta.find("\nartifact_sha256=" + sha256_hex("artifact A") + "\n"), std::string::npos) << meta;
  EXPECT_NE(meta.find("\nartifact_bytes=10\n"), std::string::npos) << meta;
  // A new object over the same directory (another process) hits too.
  KernelCache other(options());
  EXPECT_TRUE(other.get_or_build(key, writer("unused")).hit);
  EXPECT_EQ(builds_, 1);
}

TEST_F(KernelCacheTest, KeyDigestDependsOnlyOnParts) {
  const CacheKey ab{{{"a", "1"}, {"b", "2"}}};
  EXPECT_EQ(ab.digest(), (CacheKey{{{"a", "1"}, {"b", "2"}}}).digest());
  EXPECT_EQ(ab.digest().size(), 64u);
  EXPECT_NE(ab.digest(), (CacheKey{{{"b", "2"}, {"a", "1"}}}).digest());  // order matters
  EXPECT_NE(ab.digest(), (CacheKey{{{"a", "1"}, {"c", "2"}}}).digest());  // names matter
  EXPECT_NE(ab.digest(), (CacheKey{{{"a", "1"}, {"b", "3"}}}).digest());
  // No concatenation ambiguity.
  EXPECT_NE((CacheKey{{{"a", "bc"}}}).digest(), (CacheKey{{{"ab", "c"}}}).digest());
  EXPECT_NE((CacheKey{{{"a", "b"}, {"", ""}}}).digest(), (CacheKey{{{"a", "b"}}}).digest());
  EXPECT_NE((CacheKey{{{"a", "1:b"}}}).digest(), (CacheKey{{{"a", ""}, {"b", ""}}}).digest());
}

TEST_F(KernelCacheTest, CorruptArtifactIsRebuiltAndCounted) {
  KernelCache cache(options());
  const CacheKey key = make_key("kernel A");
  const std::string path = cache.get_or_build(key, writer("artifact A")).path;
  std::string bytes = read_all(path);
  bytes[3] ^= 0x01;  // same size, different content
  write_all(path, bytes);

  const CacheResult r = cache.get_or_build(key, writer("artifact A"));
  EXPECT_FALSE(r.hit);
  EXPECT_EQ(r.miss_reason, "corrupt entry rebuilt: artifact sha256 mismatch");
  EXPECT_EQ(read_all(r.path), "artifact A");
  EXPECT_EQ(builds_, 2);
  EXPECT_EQ(cache.stats().corrupt_rebuilt, 1u);
  EXPECT_TRUE(cache.get_or_build(key, writer("unused")).hit);

  write_all(path, "artifact");  // truncated
  const CacheResult shorter = cache.get_or_build(key, writer("artifact A"));
  EXPECT_NE(shorter.miss_reason.find("corrupt entry rebuilt: artifact size mismatch"), std::string::npos)
      << shorter.miss_reason;
  EXPECT_EQ(cache.stats().corrupt_rebuilt, 2u);
}

TEST_F(KernelCacheTest, TruncatedMissingOrForeignMetaIsCorrupt) {
  KernelCache cache(options());
  const CacheKey key = make_key("kernel A"), other = make_key("kernel B");
  const std::string meta = dir_ + "/" + key.digest() + ".meta";
  cache.get_or_build(key, writer("artifact A"));
  cache.get_or_build(other, writer("artifact B"));

  const std::string text = read_all(meta);
  write_all(meta, text.substr(0, text.size() / 2));
  CacheResult r = cache.get_or_build(key, writer("artifact A"));
  EXPECT_FALSE(r.hit);
  EXPECT_EQ(r.miss_reason, "corrupt entry rebuilt: meta unparsable or truncated");

  fs::remove(meta);
  r = cache.get_or_build(key, writer("artifact A"));
  EXPECT_EQ(r.miss_reason, "corrupt entry rebuilt: artifact without meta");

  // A meta describing another key, though its artifact checks out, must not serve this key.
  fs::copy_file(dir_ + "/" + other.digest() + ".meta", meta, fs::copy_options::overwrite_existing);
  fs::copy_file(dir_ + "/" + other.digest() + ".so", r.path, fs::copy_options::overwrite_existing);
  r = cache.get_or_build(key, writer("artifact A"));
  EXPECT_EQ(r.miss_reason, "corrupt entry rebuilt: meta key parts differ from the key");
  EXPECT_EQ(read_all(r.path), "artifact A");

  fs::remove(r.path);
  r = cache.get_or_build(key, writer("artifact A"));
  EXPECT_EQ(r.miss_reason, "corrupt entry rebuilt: artifact missing");
  EXPECT_EQ(cache.stats().corrupt_rebuilt, 4u);
  EXPECT_TRUE(cache.get_or_build(key, writer("unused")).hit);
  EXPECT_EQ(builds_, 6);
}

TEST_F(KernelCacheTest, FindServesOnlyValidEntriesAndBuildsNothing) {
  KernelCache cache(options());
  const CacheKey key = make_key("kernel A");
  const CacheResult empty = cache.find(key);
  EXPECT_FALSE(empty.hit);
  EXPECT_EQ(empty.path, "");
  EXPECT_EQ(empty.miss_reason, "cache empty");

  const std::string path = cache.get_or_build(key, writer("artifact A")).path;
  const std::string meta = dir_ + "/" + key.digest() + ".meta";
  age(meta, 100);
  const CacheResult found = cache.find(key);
  EXPECT_TRUE(found.hit);
  EXPECT_EQ(found.path, path);
  EXPECT_EQ(cache.stats().hits, 1u);
  struct stat st;
  ASSERT_EQ(stat(meta.c_str(), &st), 0);
  EXPECT_GT(st.st_mtime, time(nullptr) - 50);  // a use: the LRU clock moves

  EXPECT_NE(cache.find(make_key("kernel B")).miss_reason.find("differs in: ir"), std::string::npos);

  // A corrupt entry is reported, not served and not removed: the build that
  // follows rebuilds and counts it.
  write_all(path, "artifact B");
  const CacheResult corrupt = cache.find(key);
  EXPECT_FALSE(corrupt.hit);
  EXPECT_EQ(corrupt.miss_reason, "corrupt entry: artifact sha256 mismatch");
  EXPECT_TRUE(fs::exists(meta));
  EXPECT_EQ(cache.get_or_build(key, writer("artifact A")).miss_reason,
            "corrupt entry rebuilt: artifact sha256 mismatch");
  EXPECT_EQ(cache.stats().corrupt_rebuilt, 1u);
  EXPECT_EQ(builds_, 2);
  EXPECT_TRUE(cache.find(key).hit);

  KernelCache disabled({dir_, 1u << 30, false});
  EXPECT_EQ(disabled.find(key).miss_reason, "cache disabled");
}

TEST_F(KernelCacheTest, MissReasonNamesTheDifferingPart) {
  KernelCache cache(options());
  const CacheKey base = make_key("kernel A");
  cache.get_or_build(base, writer("a"));

  const std::string ir = cache.get_or_build(make_key("kernel B"), writer("b")).miss_reason;
  EXPECT_EQ(ir.rfind("no entry for this key; nearest entry " + base.digest().substr(0, 8) + "... differs in: ir (" +
                         sha256_hex("kernel A").substr(0, 4),
                     0),
            0u)
      << ir;
  EXPECT_EQ(ir.find("flags"), std::string::npos) << ir;

  const std::string flags = cache.get_or_build(make_key("kernel A", "-O2 -march=native"), writer("c")).miss_reason;
  EXPECT_NE(flags.find("differs in: flags (-O3 vs -O2)"), std::string::npos) << flags;
  EXPECT_EQ(flags.find("ir ("), std::string::npos) << flags;

  CacheKey extra = base;
  extra.parts.emplace_back("cpu", "avx2");
  const std::string added = cache.get_or_build(extra, writer("d")).miss_reason;
  EXPECT_NE(added.find("differs in: cpu (absent vs avx2)"), std::string::npos) << added;
}

TEST_F(KernelCacheTest, UnexplainedMissesReadNoOtherEntry) {
  KernelCache cache(options());
  cache.get_or_build(make_key("kernel A"), writer("a"));
  CacheOptions quiet = options();
  quiet.explain_misses = false;
  KernelCache eager(quiet);
  EXPECT_EQ(eager.get_or_build(make_key("kernel B"), writer("b")).miss_reason, "no entry for this key");
  EXPECT_EQ(eager.find(make_key("kernel C")).miss_reason, "no entry for this key");
  EXPECT_EQ(cache.find(make_key("kernel C")).miss_reason.rfind("no entry for this key; nearest", 0), 0u);
}

TEST_F(KernelCacheTest, PublishesPastTheCapEvictWithoutAScanPerPublish) {
  const std::string kb(1000, 'k');
  KernelCache cache(options(2500));
  const CacheKey a = make_key("A"), b = make_key("B"), c = make_key("C");
  cache.get_or_build(a, writer(kb));  // the first publish scans: 1000 bytes
  age(dir_ + "/" + a.digest() + ".meta", 100);
  cache.get_or_build(b, writer(kb));  // estimate 2000: under the cap, no scan
  EXPECT_EQ(cache.stats().evicted, 0u);
  cache.get_or_build(c, writer(kb));  // estimate 3000: scans, the oldest goes
  EXPECT_EQ(cache.stats().evicted, 1u);
  EXPECT_FALSE(fs::exists(dir_ + "/" + a.digest() + ".so"));
  EXPECT_TRUE(fs::exists(dir_ + "/" + b.digest() + ".so") && fs::exists(dir_ + "/" + c.digest() + ".so"));
}

TEST_F(KernelCacheTest, EscapedMetaRoundTrips) {
  KernelCache cache(options());
  // Names and values that would break a naive name=value file.
  const CacheKey key{{{"artifact_sha256", "x"}, {"a=b", "line1\nline2=\\x41\r"}, {"", ""}}};
  EXPECT_FALSE(cache.get_or_build(key, writer("z")).hit);
  EXPECT_TRUE(cache.get_or_build(key, writer("z")).hit);
  const std::string meta = read_all(dir_ + "/" + key.digest() + ".meta");
  EXPECT_EQ(std::count(meta.begin(), meta.end(), '\n'), 6) << meta;
  EXPECT_EQ(builds_, 1);
}

TEST_F(KernelCacheTest, LruEvictsTheOldestUsedEntry) {
  const CacheKey a = make_key("A"), b = make_key("B"), c = make_key("C"), d = make_key("D");
  const std::string kb(1000, 'k');
  {
    KernelCache roomy(options());
    for (const CacheKey* k : {&a, &b, &c}) roomy.get_or_build(*k, writer(kb));
  }
  // Built long ago, oldest first; then A is used again.
  age(dir_ + "/" + a.digest() + ".meta", 300);
  age(dir_ + "/" + b.digest() + ".meta", 200);
  age(dir_ + "/" + c.digest() + ".meta", 100);
  KernelCache cache(options(3000));
  EXPECT_TRUE(cache.get_or_build(a, writer(kb)).hit);
  EXPECT_FALSE(cache.get_or_build(d, writer(kb)).hit);  // 4000 bytes > 3000: one must go

  auto present = [&](const CacheKey& k) { return fs::exists(dir_ + "/" + k.digest() + ".so"); };
  EXPECT_TRUE(present(a));
  EXPECT_FALSE(present(b));
  EXPECT_FALSE(fs::exists(dir_ + "/" + b.digest() + ".meta"));
  EXPECT_FALSE(fs::exists(dir_ + "/" + b.digest() + ".lock"));
  EXPECT_TRUE(present(c));
  EXPECT_TRUE(present(d));
  EXPECT_EQ(cache.stats().evicted, 1u);

  // The entry just built survives even when it alone exceeds the cap.
  KernelCache tiny(options(500));
  const CacheKey e = make_key("E");
  EXPECT_FALSE(tiny.get_or_build(e, writer(kb)).hit);
  EXPECT_TRUE(present(e));
  EXPECT_FALSE(present(a) || present(c) || present(d));
  EXPECT_EQ(tiny.stats().evicted, 3u);
  tiny.enforce_size_cap();  // an explicit call has no entry to spare
  EXPECT_FALSE(present(e));
  EXPECT_TRUE(listing(dir_) == std::set<std::string>{".evict.lock"}) << listing(dir_).size();
}

TEST_F(KernelCacheTest, ConcurrentProcessesBuildOnce) {
  const CacheKey key = make_key("shared kernel");
  const std::string counter = root_ + "/builds.txt";
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(go[1]);
      char c;
      (void)!read(go[0], &c, 1);  // all start together when the parent closes the pipe
      int code = 1;
      try {
        KernelCache cache(options());
        const CacheResult r = cache.get_or_build(key, [&](const std::string& tmp) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          std::ofstream(counter, std::ios::app) << getpid() << "\n";
          write_all(tmp, "shared artifact");
        });
        std::ofstream(root_ + "/result." + std::to_string(i)) << r.path << "\n" << r.hit << "\n";
        code = 0;
      } catch (...) {
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  close(go[0]);
  close(go[1]);
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const std::string builds = read_all(counter);
  EXPECT_EQ(std::count(builds.begin(), builds.end(), '\n'), 1) << builds;
  int hits = 0;
  for (int i = 0; i < 4; ++i) {
    std::istringstream in(read_all(root_ + "/result." + std::to_string(i)));
    std::string path;
    int hit = 0;
    in >> path >> hit;
    EXPECT_EQ(path, dir_ + "/" + key.digest() + ".so");
    hits += hit;
  }
  EXPECT_EQ(hits, 3);
  EXPECT_EQ(read_all(dir_ + "/" + key.digest() + ".so"), "shared artifact");
}

TEST_F(KernelCacheTest, ConcurrentThreadsBuildOnce) {
  KernelCache cache(options());
  const CacheKey key = make_key("threaded kernel");
  std::atomic<int> builds{0};
  std::vector<std::string> paths(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      paths[i] = cache.get_or_build(key, [&](const std::string& tmp) {
        ++builds;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        write_all(tmp, "threaded");
      }).path;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(builds.load(), 1);
  for (const auto& p : paths) EXPECT_EQ(p, paths[0]);
  EXPECT_EQ(cache.stats().hits, 3u);
  EXPECT_EQ(cache.stats().misses, 1u);
}

TEST_F(KernelCacheTest, FailingBuildLeavesOnlyTheLock) {
  KernelCache cache(options());
  const CacheKey key = make_key("broken kernel");
  auto half_then_throw = [](const std::string& tmp) {
    write_all(tmp, "half an artif");
    throw std::invalid_argument("compiler said no");
  };
  EXPECT_THROW(cache.get_or_build(key, half_then_throw), std::invalid_argument);
  EXPECT_TRUE(listing(dir_) == std::set<std::string>{key.digest() + ".lock"});

  // A build that "succeeds" without writing anything is an error too.
  try {
    cache.get_or_build(key, [](const std::string&) {});
    FAIL() << "expected CacheError";
  } catch (const CacheError& e) {
    EXPECT_NE(std::string(e.what()).find(dir_ + "/" + key.digest() + ".tmp-"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(listing(dir_) == std::set<std::string>{key.digest() + ".lock"});
  // Nothing poisoned: the next build succeeds.
  EXPECT_FALSE(cache.get_or_build(key, writer("fixed")).hit);
  EXPECT_TRUE(cache.get_or_build(key, writer("fixed")).hit);
}

TEST_F(KernelCacheTest, DisabledCacheNeverTouchesTheDirectory) {
  std::string first_path;
  {
    KernelCache cache({dir_, 1ull << 30, false});
    const CacheKey key = make_key("kernel A");
    const CacheResult first = cache.get_or_build(key, writer("one"));
    const CacheResult second = cache.get_or_build(key, writer("two"));
    EXPECT_FALSE(first.hit || second.hit);
    EXPECT_EQ(first.miss_reason, "cache disabled");
    EXPECT_NE(first.path, second.path);  // never overwrite a library that may be loaded
    EXPECT_EQ(read_all(first.path), "one");
    EXPECT_EQ(read_all(second.path), "two");
    EXPECT_EQ(first.path.find(dir_), std::string::npos);
    EXPECT_EQ(builds_, 2);
    first_path = first.path;
  }
  EXPECT_FALSE(fs::exists(root_ + "/cache"));
  EXPECT_FALSE(fs::exists(first_path));  // the private dir goes with the cache object
}

TEST_F(KernelCacheTest, UnusableDirectoryIsATypedErrorNamingThePath) {
  write_all(root_ + "/file", "x");
  try {
    KernelCache cache({root_ + "/file/sub", 1ull << 30, true});
    FAIL() << "expected CacheError";
  } catch (const CacheError& e) {
    EXPECT_NE(std::string(e.what()).find(root_ + "/file/sub"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace openneuron::compiler
