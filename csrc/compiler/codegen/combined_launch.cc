#include "compiler/codegen/combined_launch.h"

#include <set>

namespace openneuron::compiler {

namespace {

bool is_small(const KernelGroup& g) {
  Expr n = product(g.shape);
  return n.is_const() && n.value() <= kCombinedLaunchMaxElements;
}

}  // namespace

std::vector<CombinedLaunch> combine_small_kernels(const Schedule& s, const std::vector<GeneratedKernel>& kernels) {
  std::vector<CombinedLaunch> out;
  CombinedLaunch run;
  std::set<int> freed_in_run;
  auto flush = [&] {
    if (run.steps.size() >= 2) {
      run.name = "on_launch_" + std::to_string(out.size());
      out.push_back(run);
    }
    run = CombinedLaunch();
    freed_in_run.clear();
  };
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    if (st.kind != Step::Kind::Kernel || !is_small(s.groups[st.group])) {
      flush();
      continue;
    }
    const GeneratedKernel& k = kernels[st.group];
    bool reuses_freed = false;
    for (size_t o = k.buffers.size() - k.num_outputs; o < k.buffers.size(); ++o)
      reuses_freed |= freed_in_run.count(s.reuse_of[k.buffers[o]->id]) > 0;
    if (reuses_freed) flush();
    run.steps.push_back(static_cast<int>(i));
    freed_in_run.insert(s.frees[i].begin(), s.frees[i].end());
  }
  flush();
  return out;
}

std::string combined_launch_source(const CombinedLaunch& launch, const Schedule& s,
                                   const std::vector<GeneratedKernel>& kernels,
                                   size_t num_symbols) {
  std::string src = "extern \"C\" void " + launch.name +
                    "(void** on_buffers, const int64_t* on_symbols, int64_t on_threads) {\n";
  size_t offset = 0;
  for (int step : launch.steps) {
    const GeneratedKernel& k = kernels[s.steps[step].group];
    src += "  " + k.name + "(on_buffers + " + std::to_string(offset) + ", on_symbols, on_threads);\n";
    offset += k.buffers.size();
  }
  return src + "}\n" +
         entry_info_source(launch.name, static_cast<int>(offset), static_cast<int>(num_symbols));
}

}  // namespace openneuron::compiler
