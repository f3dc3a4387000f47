#include "torch/runtime/settings.h"

#include <atomic>
#include <cstdlib>
#include <sstream>

#include <c10/util/Exception.h>

namespace openneuron::integration {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

Settings read_settings() {
  Settings s;
  const auto policy = env("OPENNEURON_CPU_FALLBACK");
  if (policy.empty() || policy == "warn") {
    s.cpu_fallback = FallbackPolicy::Warn;
  } else if (policy == "error") {
    s.cpu_fallback = FallbackPolicy::Error;
  } else if (policy == "silent") {
    s.cpu_fallback = FallbackPolicy::Silent;
  } else {
    TORCH_CHECK_VALUE(false, "OPENNEURON_CPU_FALLBACK='", policy,
                      "' is not valid: use warn, error or silent.");
  }
  std::stringstream ops(env("OPENNEURON_FORCE_CPU_FALLBACK"));
  for (std::string op; std::getline(ops, op, ',');) {
    if (op.empty()) continue;
    if (op == "all") s.force_fallback_all = true;
    if (op.find("::") == std::string::npos) op = "aten::" + op;
    s.forced_fallback_ops.push_back(op);
  }
  const auto blocking = env("OPENNEURON_LAUNCH_BLOCKING");
  s.launch_blocking = !blocking.empty() && blocking != "0";
  return s;
}

std::atomic<int> g_generation{0};

Settings& mutable_settings() {
  static Settings s = read_settings();
  return s;
}

}  // namespace

bool Settings::forces_cpu_fallback(std::string_view op) const {
  if (force_fallback_all) return true;
  const auto base = op.substr(0, op.find('.'));
  for (const auto& entry : forced_fallback_ops)
    if (entry == op || entry == base) return true;
  return false;
}

const Settings& settings() { return mutable_settings(); }
void reload_settings() {
  mutable_settings() = read_settings();
  ++g_generation;
}
int settings_generation() { return g_generation.load(std::memory_order_relaxed); }
void set_cpu_fallback_policy(FallbackPolicy policy) {
  mutable_settings().cpu_fallback = policy;
}

}  // namespace openneuron::integration
