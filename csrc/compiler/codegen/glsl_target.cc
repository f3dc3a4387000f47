#include "compiler/codegen/glsl_target.h"

#include <shaderc/shaderc.hpp>

#include <sstream>

#include "compiler/cache/sha256.h"
#include "compiler/codegen/glsl_gemm_coop.h"
#include "compiler/codegen/glsl_kernel.h"
#include "compiler/codegen/glsl_library.h"
#include "compiler/codegen/glsl_prelude.h"
#include "compiler/ir/errors.h"
#include "hal/drivers/vulkan/spirv_executable_file.h"

namespace openneuron::compiler {

std::string GlslTarget::prelude() const { return std::string(kGlslPrelude) + kGlslFp64Math; }

GeneratedKernel GlslTarget::kernel(const KernelGroup& group, const std::string& entry,
                                   const std::vector<std::string>& symbols) const {
  return generate_glsl_kernel(group, entry, symbols, fp64_);
}

std::string GlslTarget::combined_launch(const CombinedLaunch&, const Schedule&,
                                        const std::vector<GeneratedKernel>&, size_t) const {
  throw CompileError("the glsl target does not combine kernels");
}

std::vector<uint32_t> compile_glsl_to_spirv(const std::string& source, const std::string& name) {
  static const shaderc::Compiler compiler;  // thread-safe for concurrent compiles
  shaderc::CompileOptions options;
  options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
  options.SetOptimizationLevel(shaderc_optimization_level_performance);
  auto result = compiler.CompileGlslToSpv(source, shaderc_compute_shader, name.c_str(), options);
  if (result.GetCompilationStatus() != shaderc_compilation_status_success)
    throw CompileError("GLSL compile of kernel " + name + " failed: " + result.GetErrorMessage());
  return {result.cbegin(), result.cend()};
}

// The library's source: the prelude, then kernels each opening with their
// "//@entry" line (glsl_kernel.h). Each kernel becomes a shader of its own:
// the header, the prelude, the kernel.
void GlslTarget::build(const std::string& source, const std::string& output) const {
  const std::string marker = "//@entry ";
  size_t at = source.find(marker);
  // ON_FP64 keeps the prelude's float64 functions: a shader that declares
  // float64 needs the device feature even if it never calls them.
  const std::string shared = std::string(kGlslHeader) + (fp64_ ? "#define ON_FP64 1\n" : "") + source.substr(0, at);
  std::vector<hal::SpirvEntry> entries;
  while (at != std::string::npos) {
    const size_t next = source.find(marker, at + marker.size());
    const std::string kernel = source.substr(at, next == std::string::npos ? std::string::npos : next - at);
    std::istringstream header(kernel.substr(marker.size(), kernel.find('\n') - marker.size()));
    hal::SpirvEntry entry;
    header >> entry.info.name >> entry.info.bindings >> entry.info.scalars >> entry.info.workgroup_size[0] >>
        entry.info.workgroup_size[1] >> entry.info.workgroup_size[2];
    if (!header) throw CompileError("malformed kernel header in GLSL library: " + kernel.substr(0, 80));
    entry.spirv = compile_glsl_to_spirv(shared + kernel, entry.info.name);
    entries.push_back(std::move(entry));
    at = next;
  }
  // The cooperative-matrix gemm, compiled at build time (glsl_gemm_coop.h),
  // beside its emulation in the library, with the same arguments; its
  // pipeline is only ever created on a device with cooperative matrices.
  for (size_t i = 0; i < entries.size() && !glsl_coop_gemm_spirv().empty(); ++i)
    if (entries[i].info.name == "gemm_coop_emulated_f16") {
      hal::SpirvEntry coop{entries[i].info, glsl_coop_gemm_spirv()};
      coop.info.name = "gemm_coop_f16";
      entries.push_back(std::move(coop));
      break;
    }
  try {
    hal::write_spirv_executable(output, entries);
  } catch (const std::exception& e) {
    throw CompileError(e.what());
  }
}

std::string GlslTarget::library_source() const {
  // The prelude first: build() shares what precedes the first kernel.
  return prelude() + glsl_library_source(fp64_);
}

std::array<int64_t, 3> GlslTarget::launch_grid(const KernelGroup&) const {
  // Kernels loop over their elements with any grid: the runtime sizes it
  // for the device at launch.
  return {0, 1, 1};
}

std::vector<std::pair<std::string, std::string>> GlslTarget::cache_key_parts() const {
  unsigned int version = 0, revision = 0;
  shaderc_get_spv_version(&version, &revision);
  static const std::string coop_digest = [] {
    const std::vector<uint32_t>& coop = glsl_coop_gemm_spirv();
    return coop.empty() ? std::string("none")
                        : sha256_hex(std::string_view(reinterpret_cast<const char*>(coop.data()), coop.size() * 4));
  }();
  return {{"shaderc_spirv", std::to_string(version) + "." + std::to_string(revision)},
          {"glsl_header", sha256_hex(kGlslHeader)}, {"glsl_fp64", fp64_ ? "1" : "0"},
          {"coop_gemm_spirv", coop_digest}};
}

}  // namespace openneuron::compiler
