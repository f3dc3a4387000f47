// Where a batch needs a pipeline barrier: before a command that reads what
// an earlier command of the batch wrote, or writes what an earlier one read
// or wrote, since the last barrier. Copies, fills and updates name their
// exact ranges; a kernel's bindings carry no extents, so a dispatch counts
// as touching everything (a barrier on each side of it). Back-to-back
// uploads and fills of distinct memory then run with no barrier at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace openneuron::hal {

class HazardTracker {
 public:
  struct Range {
    uintptr_t begin = 0, end = 0;
  };
  struct Access {
    Range reads[1];
    int read_count = 0;
    Range write;
    bool touches_everything = false;  // a dispatch
  };
  static Access copy(const void* dst, const void* src, size_t bytes) {
    Access a = write_only(dst, bytes);
    a.reads[0] = range(src, bytes);
    a.read_count = src ? 1 : 0;
    return a;
  }
  static Access write_only(const void* dst, size_t bytes) {
    Access a;
    a.write = range(dst, bytes);
    return a;
  }
  static Access read_only(const void* src, size_t bytes) {
    Access a;
    a.reads[0] = range(src, bytes);
    a.read_count = 1;
    return a;
  }
  static Access everything() {
    Access a;
    a.touches_everything = true;
    return a;
  }

  // Records `access`; true when a barrier must precede it (the tracker then
  // starts over from it).
  bool needs_barrier(const Access& access) {
    bool conflict = everything_ || (access.touches_everything && !empty());
    for (const Range& w : writes_) {
      conflict = conflict || overlaps(w, access.write);
      for (int i = 0; i < access.read_count; ++i) conflict = conflict || overlaps(w, access.reads[i]);
    }
    for (const Range& r : reads_) conflict = conflict || overlaps(r, access.write);
    if (conflict) reset();
    everything_ = access.touches_everything;
    if (access.write.end > access.write.begin) writes_.push_back(access.write);
    for (int i = 0; i < access.read_count; ++i) reads_.push_back(access.reads[i]);
    return conflict;
  }
  void reset() {
    reads_.clear();
    writes_.clear();
    everything_ = false;
  }

 private:
  static Range range(const void* p, size_t bytes) {
    const auto b = reinterpret_cast<uintptr_t>(p);
    return Range{b, b + bytes};
  }
  static bool overlaps(const Range& a, const Range& b) {
    return a.begin < b.end && b.begin < a.end;
  }
  bool empty() const { return reads_.empty() && writes_.empty() && !everything_; }

  std::vector<Range> reads_, writes_;
  bool everything_ = false;
};

}  // namespace openneuron::hal
