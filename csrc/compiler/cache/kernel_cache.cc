#include "compiler/cache/kernel_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

#include "compiler/cache/sha256.h"

namespace openneuron::compiler {
namespace {

namespace fs = std::filesystem;
using Parts = std::vector<std::pair<std::string, std::string>>;

constexpr std::string_view kMetaHeader = "# openneuron kernel cache entry v1";
constexpr std::string_view kTmpTag = ".tmp-";
// A temp file this old was left by a crashed writer: no kernel build takes an hour.
constexpr time_t kStaleTmpSeconds = 3600;
// Publishes between two full scans of the directory when this process's own
// estimate stays under the cap.
constexpr uint64_t kRescanPublishes = 256;

[[noreturn]] void fail(const std::string& what, const std::string& path, const std::string& why) {
  throw CacheError("kernel cache: " + what + " " + path + ": " + why);
}
[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  fail(what, path, std::generic_category().message(err));
}

// Owns a descriptor; closing it also drops any flock held through it.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Locks `path` exclusively (flock: works across processes, and across threads
// since each call opens its own description). Returns nullopt only when !wait
// and the lock is held elsewhere.
std::optional<Fd> lock_file(const std::string& path, bool wait) {
  for (;;) {
    Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
    if (fd.get() < 0) fail("cannot open lock file", path, errno);
    int rc;
    while ((rc = ::flock(fd.get(), wait ? LOCK_EX : LOCK_EX | LOCK_NB)) < 0 && errno == EINTR) {
    }
    if (rc < 0) {
      if (!wait && errno == EWOULDBLOCK) return std::nullopt;
      fail("cannot lock", path, errno);
    }
    // Eviction unlinks lock files while holding them; if ours was unlinked while
    // we waited, it no longer excludes anyone: lock the current file instead.
    struct stat held, current;
    if (::fstat(fd.get(), &held) == 0 && ::stat(path.c_str(), &current) == 0 &&
        held.st_dev == current.st_dev && held.st_ino == current.st_ino) {
      return std::optional<Fd>(std::move(fd));
    }
  }
}

// Unique within the directory: pid for processes, a counter for threads and calls.
std::string temp_name(const std::string& base, const char* ext) {
  static std::atomic<uint64_t> counter{0};
  return base + std::string(kTmpTag) + std::to_string(::getpid()) + "-" +
         std::to_string(counter.fetch_add(1)) + ext;
}

void remove_file(const std::string& path) {
  if (::unlink(path.c_str()) < 0 && errno != ENOENT) fail("cannot remove", path, errno);
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<std::string> list_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) fail("cannot list", dir, errno);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  return names;
}

// nullopt when the file does not exist.
std::optional<std::string> read_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    fail("cannot open", path, errno);
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n == 0) return out;
    if (n < 0 && errno != EINTR) fail("cannot read", path, errno);
    if (n > 0) out.append(buf, size_t(n));
  }
}

// Writes a temp file next to `path` and renames it over `path`.
void write_file_atomically(const std::string& path, const std::string& base, std::string_view data) {
  const std::string tmp = temp_name(base, ".meta");
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) fail("cannot create", tmp, errno);
  auto give_up = [&](const char* what) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(what, tmp, err);
  };
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno != EINTR) give_up("cannot write");
    if (n > 0) done += size_t(n);
  }
  if (::close(fd.release()) < 0) give_up("cannot close");
  if (::rename(tmp.c_str(), path.c_str()) < 0) give_up("cannot rename into place");
}

bool is_hex(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The digest D of a file named "D<ext>", if it is one.
std::optional<std::string> digest_of(const std::string& name, std::string_view ext) {
  if (name.size() != 64 + ext.size() || !name.ends_with(ext) || !is_hex(std::string_view(name).substr(0, 64))) {
    return std::nullopt;
  }
  return name.substr(0, 64);
}

// Meta lines must survive any bytes in names and values: escape '\', control
// bytes, and '=' in names (the first '=' separates name from value).
std::string escape(std::string_view s, bool is_name) {
  std::string out;
  for (const unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f || (is_name && c == '=')) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

std::optional<std::string> unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
    } else if (i + 1 < s.size() && s[i + 1] == '\\') {
      out += '\\';
      i += 1;
    } else if (i + 3 < s.size() && s[i + 1] == 'x' && is_hex(s.substr(i + 2, 2))) {
      out += char(std::stoi(std::string(s.substr(i + 2, 2)), nullptr, 16));
      i += 3;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

struct Meta {
  Parts parts;
  std::string artifact_sha256;
  uint64_t artifact_bytes = 0;
};

std::string format_meta(const Meta& meta) {
  std::string out = std::string(kMetaHeader) + "\n";
  for (const auto& [name, value] : meta.parts) out += escape(name, true) + "=" + escape(value, false) + "\n";
  out += "artifact_sha256=" + meta.artifact_sha256 + "\n";
  out += "artifact_bytes=" + std::to_string(meta.artifact_bytes) + "\n";
  return out;
}

// The artifact lines are the last two, so a key part may have any name.
std::optional<Meta> parse_meta(std::string_view text) {
  if (text.empty() || text.back() != '\n') return std::nullopt;
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  if (lines.size() < 3 || lines[0] != kMetaHeader) return std::nullopt;
  Meta meta;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t eq = lines[i].find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    auto name = unescape(lines[i].substr(0, eq));
    auto value = unescape(lines[i].substr(eq + 1));
    if (!name || !value) return std::nullopt;
    if (i + 2 < lines.size()) {
      meta.parts.emplace_back(std::move(*name), std::move(*value));
    } else if (i + 2 == lines.size()) {
      if (*name != "artifact_sha256" || value->size() != 64 || !is_hex(*value)) return std::nullopt;
      meta.artifact_sha256 = *value;
    } else {
      const char* end = value->data() + value->size();
      if (*name != "artifact_bytes" || value->empty() ||
          std::from_chars(value->data(), end, meta.artifact_bytes).ptr != end) {
        return std::nullopt;
      }
    }
  }
  return meta;
}

std::string hash_artifact(int fd, const std::string& path, uint64_t* bytes) {
  try {
    return sha256_fd_hex(fd, bytes);
  } catch (const std::system_error& e) {
    fail("cannot read", path, e.code().message());
  }
}

enum class State { kValid, kAbsent, kCorrupt };
struct Check {
  State state;
  std::string why;  // for kCorrupt
};

// Whether the entry at `base` can serve `key`. Caller holds the key lock.
Check check_entry(const std::string& base, const CacheKey& key) {
  const std::string artifact = base + ".so";
  const auto text = read_file(base + ".meta");
  if (!text) {
    if (file_exists(artifact)) return {State::kCorrupt, "artifact without meta"};
    return {State::kAbsent, ""};
  }
  const auto meta = parse_meta(*text);
  if (!meta) return {State::kCorrupt, "meta unparsable or truncated"};
  if (meta->parts != key.parts) return {State::kCorrupt, "meta key parts differ from the key"};
  Fd fd(::open(artifact.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return {State::kCorrupt, "artifact missing"};
    fail("cannot open", artifact, errno);
  }
  uint64_t bytes = 0;
  const std::string sha = hash_artifact(fd.get(), artifact, &bytes);
  if (bytes != meta->artifact_bytes) {
    return {State::kCorrupt, "artifact size mismatch (" + std::to_string(bytes) + " bytes, meta says " +
                                 std::to_string(meta->artifact_bytes) + ")"};
  }
  if (sha != meta->artifact_sha256) return {State::kCorrupt, "artifact sha256 mismatch"};
  return {State::kValid, ""};
}

bool earlier(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec < b.tv_sec : a.tv_nsec < b.tv_nsec;
}

std::string abbreviate(const std::string& s, size_t max) {
  return s.size() <= max ? s : s.substr(0, max - 2) + "..";
}

// A short form of one value in a miss reason.
std::string show(const std::string& value) {
  if (is_hex(value) && value.size() > 8) return value.substr(0, 4) + "..";
  return abbreviate(escape(value, false), 24);
}

// " (old vs new)" for a changed part, shortened; "" when no short form helps.
std::string describe_change(const std::string& a, const std::string& b) {
  if (is_hex(a) && is_hex(b) && std::max(a.size(), b.size()) > 8) {
    size_t n = 4;  // long enough that the two prefixes differ
    while (n < std::min(a.size(), b.size()) && a.compare(0, n, b, 0, n) == 0) ++n;
    return " (" + a.substr(0, n) + ".. vs " + b.substr(0, n) + "..)";
  }
  // Token lists such as flags or CPU features: name only the differing tokens.
  auto tokens = [](const std::string& s) {
    std::vector<std::string> out;
    for (size_t i = 0; i < s.size();) {
      const size_t j = std::min(s.find(' ', i), s.size());
      if (j > i) out.push_back(s.substr(i, j - i));
      i = j + 1;
    }
    return out;
  };
  auto only_in = [](const std::vector<std::string>& x, const std::vector<std::string>& y) {
    std::string out;
    for (const auto& t : x) {
      if (std::find(y.begin(), y.end(), t) == y.end()) out += (out.empty() ? "" : " ") + t;
    }
    return out.empty() ? std::string("-") : abbreviate(escape(out, false), 40);
  };
  const auto ta = tokens(a), tb = tokens(b);
  if (ta.size() < 2 && tb.size() < 2) {
    if (a.size() <= 24 && b.size() <= 24) return " (" + escape(a, false) + " vs " + escape(b, false) + ")";
    return "";
  }
  return " (" + only_in(ta, tb) + " vs " + only_in(tb, ta) + ")";
}

const std::string* find_part(const Parts& parts, const std::string& name) {
  for (const auto& [n, v] : parts) {
    if (n == name) return &v;
  }
  return nullptr;
}

}  // namespace

std::string CacheKey::digest() const {
  // Length-prefixed, so no two part lists serialize to the same bytes.
  Sha256 h;
  h.update("openneuron-kernel-cache-key-v1\n");
  for (const auto& [name, value] : parts) {
    for (const std::string* s : {&name, &value}) {
      h.update(std::to_string(s->size()) + ":");
      h.update(*s);
    }
  }
  return h.hex_digest();
}

KernelCache::KernelCache(CacheOptions options) : options_(std::move(options)) {
  if (!options_.enabled) return;
  if (options_.directory.empty()) throw CacheError("kernel cache: no directory given");
  std::error_code ec;
  fs::create_directories(options_.directory, ec);
  if (ec) fail("cannot create directory", options_.directory, ec.message());
  if (!fs::is_directory(options_.directory, ec)) fail("not a directory:", options_.directory, ENOTDIR);
}

KernelCache::~KernelCache() {
  if (!private_dir_.empty() && private_dir_owner_ == ::getpid()) {
    std::error_code ec;
    fs::remove_all(private_dir_, ec);
  }
}

std::string KernelCache::entry_base(const std::string& digest) const {
  const std::string& dir = options_.directory;
  return dir.ends_with('/') ? dir + digest : dir + "/" + digest;
}

CacheResult KernelCache::get_or_build(const CacheKey& key, const BuildFn& build) {
  const std::string digest = key.digest();
  if (!options_.enabled) return build_uncached(digest, build);
  const std::string base = entry_base(digest);
  const std::string artifact = base + ".so", meta_path = base + ".meta";
  // Held through check, build and publish: concurrent askers wait, then hit.
  const Fd lock = std::move(*lock_file(base + ".lock", true));

  CacheResult result{artifact, false, ""};
  const Check check = check_entry(base, key);
  if (check.state == State::kValid) return hit(base);
  ++misses_;
  const bool corrupt = check.state == State::kCorrupt;
  if (corrupt) {
    // Meta first: the entry stops existing before its artifact does.
    remove_file(meta_path);
    remove_file(artifact);
    result.miss_reason = "corrupt entry rebuilt: " + check.why;
  } else {
    result.miss_reason = options_.explain_misses ? describe_miss(key, digest) : "no entry for this key";
  }

  const std::string tmp = temp_name(base, ".so");
  bool published_artifact = false;
  uint64_t meta_bytes = 0;
  try {
    build(tmp);
    Fd fd(::open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) fail("build produced no artifact at", tmp, errno);
    Meta meta{key.parts, "", 0};
    meta.artifact_sha256 = hash_artifact(fd.get(), tmp, &meta.artifact_bytes);
    meta_bytes = meta.artifact_bytes;
    // Artifact before meta: the meta's appearance is what publishes the entry.
    if (::rename(tmp.c_str(), artifact.c_str()) < 0) fail("cannot rename into place", artifact, errno);
    published_artifact = true;
    write_file_atomically(meta_path, base, format_meta(meta));
  } catch (...) {
    ::unlink(tmp.c_str());
    if (published_artifact) ::unlink(artifact.c_str());
    throw;
  }
  if (corrupt) ++corrupt_rebuilt_;
  evict_if_due(digest, meta_bytes);  // still under our key lock, so no other evictor can take this entry
  return result;
}

CacheResult KernelCache::find(const CacheKey& key) {
  if (!options_.enabled) return {"", false, "cache disabled"};
  const std::string digest = key.digest();
  const std::string base = entry_base(digest);
  const Fd lock = std::move(*lock_file(base + ".lock", true));
  const Check check = check_entry(base, key);
  if (check.state == State::kValid) return hit(base);
  if (check.state == State::kCorrupt) return {"", false, "corrupt entry: " + check.why};
  return {"", false, options_.explain_misses ? describe_miss(key, digest) : "no entry for this key"};
}

// A valid entry, found under its key lock.
CacheResult KernelCache::hit(const std::string& base) {
  // The meta's mtime is the LRU clock.
  const std::string meta_path = base + ".meta";
  if (::utimensat(AT_FDCWD, meta_path.c_str(), nullptr, 0) < 0) fail("cannot touch", meta_path, errno);
  ++hits_;
  return {base + ".so", true, ""};
}

CacheResult KernelCache::build_uncached(const std::string& digest, const BuildFn& build) {
  std::string dir;
  {
    std::lock_guard<std::mutex> guard(private_dir_mutex_);
    if (private_dir_.empty()) {
      const char* tmpdir = std::getenv("TMPDIR");
      std::string pattern = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/openneuron-kernels-XXXXXX";
      if (!::mkdtemp(pattern.data())) fail("cannot create temp dir", pattern, errno);
      private_dir_ = pattern;
      private_dir_owner_ = ::getpid();
    }
    dir = private_dir_;
  }
  ++misses_;
  // A fresh name per build: a library already loaded must not be overwritten.
  const std::string path = temp_name(dir + "/" + digest, ".so");
  try {
    build(path);
  } catch (...) {
    ::unlink(path.c_str());
    throw;
  }
  if (!file_exists(path)) fail("build produced no artifact at", path, errno);
  return {path, false, "cache disabled"};
}

void KernelCache::evict_if_due(const std::string& keep_digest, uint64_t added_bytes) {
  std::lock_guard<std::mutex> guard(evict_mutex_);
  estimated_bytes_ += added_bytes;
  if (scanned_ && estimated_bytes_ <= options_.max_bytes && ++publishes_since_scan_ < kRescanPublishes) return;
  estimated_bytes_ = evict(keep_digest);
  scanned_ = true;
  publishes_since_scan_ = 0;
}

void KernelCache::enforce_size_cap() {
  if (options_.enabled) evict("");
}

uint64_t KernelCache::evict(const std::string& keep_digest) {
  const std::string& dir = options_.directory;
  const Fd dir_lock = std::move(*lock_file(entry_base(".evict.lock"), true));

  struct Entry {
    std::string digest;
    timespec used;
    uint64_t bytes;
  };
  std::vector<Entry> entries;
  std::vector<std::string> orphans;  // a .so or .lock without a meta
  uint64_t total = 0;
  const time_t now = ::time(nullptr);
  for (const std::string& name : list_dir(dir)) {
    const std::string path = entry_base(name);
    struct stat st;
    if (::stat(path.c_str(), &st) < 0 || !S_ISREG(st.st_mode)) continue;
    if (name.find(kTmpTag) != std::string::npos) {
      if (now - st.st_mtime > kStaleTmpSeconds) remove_file(path);
    } else if (auto d = digest_of(name, ".meta")) {
      struct stat so;
      const bool has_so = ::stat((entry_base(*d) + ".so").c_str(), &so) == 0;
      entries.push_back({*d, st.st_mtim, has_so ? uint64_t(so.st_size) : 0});
      total += entries.back().bytes;
    } else if (auto o = digest_of(name, ".so"); o || (o = digest_of(name, ".lock"))) {
      if (*o != keep_digest && !file_exists(entry_base(*o) + ".meta")) orphans.push_back(*o);
    }
  }

  // Another process's build in progress holds its key lock, so a try-lock
  // tells a crash leftover from a live build. Lock files go last, while held.
  std::sort(orphans.begin(), orphans.end());
  orphans.erase(std::unique(orphans.begin(), orphans.end()), orphans.end());
  for (const std::string& d : orphans) {
    const std::string base = entry_base(d);
    const auto lock = lock_file(base + ".lock", false);
    if (!lock || file_exists(base + ".meta")) continue;
    remove_file(base + ".so");
    remove_file(base + ".lock");
  }

  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return earlier(a.used, b.used) || (!earlier(b.used, a.used) && a.digest < b.digest);
  });
  for (const Entry& e : entries) {
    if (total <= options_.max_bytes) break;
    if (e.digest == keep_digest) continue;
    const std::string base = entry_base(e.digest);
    const auto lock = lock_file(base + ".lock", false);
    if (!lock) continue;  // being read or rebuilt right now
    struct stat st;
    if (::stat((base + ".meta").c_str(), &st) < 0 || earlier(e.used, st.st_mtim)) continue;  // used since
    remove_file(base + ".meta");
    remove_file(base + ".so");
    remove_file(base + ".lock");
    total -= e.bytes;
    ++evicted_;
  }
  return total;
}

std::string KernelCache::describe_miss(const CacheKey& key, const std::string& digest) const {
  std::lock_guard<std::mutex> guard(seen_mutex_);
  std::set<std::string> present;
  for (const std::string& name : list_dir(options_.directory)) {
    const auto d = digest_of(name, ".meta");
    if (!d) continue;
    present.insert(*d);
    if (seen_.count(*d)) continue;
    const std::string path = entry_base(name);
    struct stat st;
    try {
      const auto text = read_file(path);
      const auto meta = text && ::stat(path.c_str(), &st) == 0 ? parse_meta(*text) : std::nullopt;
      if (meta) seen_[*d] = {meta->parts, int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    } catch (const CacheError&) {
      // An unreadable neighbour only makes the reason less precise.
    }
  }
  std::erase_if(seen_, [&](const auto& e) { return !present.count(e.first); });

  const SeenEntry* best = nullptr;
  std::string best_digest;
  size_t best_score = 0;
  for (const auto& [d, entry] : seen_) {
    if (d == digest) continue;
    const size_t score = std::count_if(key.parts.begin(), key.parts.end(), [&](const auto& part) {
      return std::find(entry.parts.begin(), entry.parts.end(), part) != entry.parts.end();
    });
    if (!best || score > best_score || (score == best_score && entry.used_ns > best->used_ns)) {
      best = &entry;
      best_digest = d;
      best_score = score;
    }
  }
  if (!best) return "cache empty";

  std::vector<std::string> diffs;
  for (const auto& [name, value] : key.parts) {
    const std::string* theirs = find_part(best->parts, name);
    if (!theirs) {
      diffs.push_back(escape(name, false) + " (absent vs " + show(value) + ")");
    } else if (*theirs != value) {
      diffs.push_back(escape(name, false) + describe_change(*theirs, value));
    }
  }
  for (const auto& [name, value] : best->parts) {
    if (!find_part(key.parts, name)) diffs.push_back(escape(name, false) + " (" + show(value) + " vs absent)");
  }
  std::string out = "no entry for this key; nearest entry " + best_digest.substr(0, 8) + "... differs in: ";
  if (diffs.empty()) return out + "part order";
  for (size_t i = 0; i < diffs.size(); ++i) out += (i ? ", " : "") + diffs[i];
  return out;
}

KernelCache::Stats KernelCache::stats() const {
  return {hits_.load(), misses_.load(), corrupt_rebuilt_.load(), evicted_.load()};
}

}  // namespace openneuron::compiler
