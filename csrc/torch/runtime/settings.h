// Settings of the integration layer, read once from the environment (the
// README's table documents each). HAL settings live in hal/config.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace openneuron::integration {

enum class FallbackPolicy { Warn, Error, Silent };

struct Settings {
  FallbackPolicy cpu_fallback = FallbackPolicy::Warn;  // OPENNEURON_CPU_FALLBACK
  std::vector<std::string> forced_fallback_ops;  // OPENNEURON_FORCE_CPU_FALLBACK
  bool force_fallback_all = false;
  bool launch_blocking = false;  // OPENNEURON_LAUNCH_BLOCKING
  // Eager ops as compiler-made device kernels on drivers whose memory the
  // host cannot address (OPENNEURON_EAGER_KERNELS, on by default).
  bool eager_kernels = true;
  // Adaptive Eager Execution: chains of pointwise eager ops fused into one
  // kernel (OPENNEURON_EAGER_FUSION, on by default on every driver; off:
  // each op alone, bitwise CPU's on host; eager_fusion.h).
  bool eager_fusion = true;
  // Fused chains' kernels build off the calling thread where their calls
  // run unfused at ATen's speed meanwhile (OPENNEURON_EAGER_FUSION_BUILDS:
  // background, the default, or sync; background_builds.h).
  bool eager_fusion_background_builds = true;
  // Ops without a device kernel run as PyTorch's decompositions on the
  // device before the CPU fallback (OPENNEURON_EAGER_DECOMPOSITIONS, on).
  bool eager_decompositions = true;
  // float32 products on the host driver (OPENNEURON_HOST_MATMUL): our
  // routes (few-row kernel, oneDNN) or ATen's; Auto picks ours where MKL is
  // slow (onednn_matmul.cc says why).
  enum class HostMatmul { Auto, Own, Aten } host_matmul = HostMatmul::Auto;
  // The compiler's persistent kernel cache, as torch.compile uses it
  // (OPENNEURON_COMPILE_CACHE*, read the same way as compiler/config.py).
  std::string compile_cache_dir;
  bool compile_cache_enabled = true;
  int64_t compile_cache_max_bytes = 1024LL << 20;

  // True when `op` ("aten::add.Tensor") must take the CPU-fallback path.
  // Entries match the full name or the name without overload ("aten::add").
  bool forces_cpu_fallback(std::string_view op) const;
};

const Settings& settings();
// Re-reads the environment (tests; OPENNEURON_FORCE_CPU_FALLBACK changes).
void reload_settings();
void set_cpu_fallback_policy(FallbackPolicy policy);
void set_eager_fusion_setting(bool enabled);  // eager_fusion.h's switch (On or Off)
// Bumped by reload_settings(), so cached per-op routes are recomputed.
int settings_generation();

}  // namespace openneuron::integration
