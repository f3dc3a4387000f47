#include "hal/allocator_stats.h"

#include <algorithm>

namespace openneuron::hal {

void Stat::increase(int64_t amount) {
  current += amount;
  peak = std::max(peak, current);
  allocated += amount;
}

void Stat::decrease(int64_t amount) {
  current -= amount;
  freed += amount;
}

void update_stat(StatArray& stats, Pool pool, int64_t delta) {
  auto apply = [delta](Stat& stat) {
    if (delta >= 0) {
      stat.increase(delta);
    } else {
      stat.decrease(-delta);
    }
  };
  apply(stats[static_cast<size_t>(Pool::All)]);
  if (pool != Pool::All) apply(stats[static_cast<size_t>(pool)]);
}

}  // namespace openneuron::hal
