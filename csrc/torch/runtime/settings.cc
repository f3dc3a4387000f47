#include "torch/runtime/settings.h"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include <c10/util/Exception.h>

namespace openneuron::integration {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// As compiler/config.py's _flag: unset or empty is the default; 0, false,
// no and off are false.
bool flag(const char* name, bool fallback) {
  std::string v = env(name);
  if (v.empty()) return fallback;
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v != "0" && v != "false" && v != "no" && v != "off";
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
  s.eager_kernels = flag("OPENNEURON_EAGER_KERNELS", true);
  s.eager_fusion = flag("OPENNEURON_EAGER_FUSION", true);
  const auto builds = env("OPENNEURON_EAGER_FUSION_BUILDS");
  TORCH_CHECK_VALUE(builds.empty() || builds == "background" || builds == "sync", "OPENNEURON_EAGER_FUSION_BUILDS='",
                    builds, "' is not valid: use background or sync.");
  s.eager_fusion_background_builds = builds != "sync";
  s.eager_decompositions = flag("OPENNEURON_EAGER_DECOMPOSITIONS", true);
  const auto matmul = env("OPENNEURON_HOST_MATMUL");
  if (matmul == "own") {
    s.host_matmul = Settings::HostMatmul::Own;
  } else if (matmul == "aten") {
    s.host_matmul = Settings::HostMatmul::Aten;
  } else {
    TORCH_CHECK_VALUE(matmul.empty() || matmul == "auto", "OPENNEURON_HOST_MATMUL='", matmul,
                      "' is not valid: use auto, own or aten.");
  }
  s.compile_cache_enabled = flag("OPENNEURON_COMPILE_CACHE", true);
  s.compile_cache_dir = env("OPENNEURON_COMPILE_CACHE_DIR");
  if (s.compile_cache_dir.empty()) {
    const std::string xdg = env("XDG_CACHE_HOME");
    s.compile_cache_dir = (xdg.empty() ? env("HOME") + "/.cache" : xdg) + "/openneuron/kernels";
  }
  const auto max_mb = env("OPENNEURON_COMPILE_CACHE_MAX_MB");
  if (!max_mb.empty()) s.compile_cache_max_bytes = static_cast<int64_t>(std::stod(max_mb) * (1 << 20));
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
void set_eager_fusion_setting(bool enabled) {
  mutable_settings().eager_fusion = enabled;
  ++g_generation;
}
void set_cpu_fallback_policy(FallbackPolicy policy) {
  mutable_settings().cpu_fallback = policy;
}

}  // namespace openneuron::integration
