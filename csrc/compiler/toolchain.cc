#include "compiler/toolchain.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "compiler/ir/errors.h"

namespace openneuron::compiler {

namespace {

std::string run_capture(const std::string& command, int* status) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) throw CompileError("cannot run: " + command);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int rc = pclose(p);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

std::string cpu_features() {
  static const std::set<std::string> wanted = {
      "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq",
      "avx512cd", "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_tile", "asimd", "sve"};
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0 && line.rfind("Features", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> found;
    std::string w;
    while (words >> w)
      if (wanted.count(w)) found.insert(w);
    std::string out;
    for (auto& f : found) out += (out.empty() ? "" : " ") + f;
    return out;
  }
  return "unknown";
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

const Toolchain& toolchain() {
  static const Toolchain tc = [] {
    Toolchain t;
    if (const char* cxx = std::getenv("OPENNEURON_CXX"); cxx && *cxx) t.cxx = cxx;
    // -fno-math-errno lets libm calls vectorise; no -ffast-math, so NaN and
    // infinity behave as in ATen's kernels; -ffp-contract=off: a*b+c rounds
    // twice, as eager does, instead of becoming one FMA.
    t.flags = "-std=c++17 -O3 -march=native -fPIC -shared -fopenmp -fno-math-errno -fno-trapping-math "
              "-ffp-contract=off "
              "-fno-semantic-interposition -w";
    int status = 0;
    std::string v = run_capture(t.cxx + " --version 2>&1", &status);
    if (status != 0) throw CompileError("the C++ compiler '" + t.cxx + "' does not run (set OPENNEURON_CXX)");
    t.version = v.substr(0, v.find('\n'));
    // GCC does not trust restrict on pointers loaded from the buffer array
    // (nor inside OpenMP regions), so it vectorises a loop only behind
    // runtime overlap checks, and gives up past 10 of them: a kernel with 3
    // outputs and 5 inputs (an AdamW update) ran scalar. The checks are
    // cheap next to a scalar loop; clang has no such limit to raise.
    if (t.version.find("clang") == std::string::npos) t.flags += " --param=vect-max-version-for-alias-checks=64";
    t.cpu_features = cpu_features();
    // GCC tunes recent x86 CPUs for 256-bit vectors even where AVX-512 is
    // there; ATen's and Inductor's kernels use 512 bits on such CPUs, and so
    // do ours: a softmax row kernel (exp-bound) ran 3.0 -> 2.3 ms on a
    // Sapphire Rapids Xeon. Memory-bound kernels are unchanged.
    const std::set<std::string> features = [&] {
      std::istringstream words(t.cpu_features);
      return std::set<std::string>(std::istream_iterator<std::string>(words), {});
    }();
    if (features.count("avx512f") && features.count("avx512bw") && features.count("avx512vl") &&
        features.count("avx512dq"))
      t.flags += " -mprefer-vector-width=512";
    return t;
  }();
  return tc;
}

void compile_shared_object(const std::string& source, const std::string& output) {
  const Toolchain& tc = toolchain();
  std::string src = output + ".cpp";
  {
    std::ofstream f(src);
    f << source;
    if (!f) throw CompileError("cannot write kernel source " + src);
  }
  int status = 0;
  std::string log = run_capture(tc.cxx + " " + tc.flags + " -o " + shell_quote(output) + " " + shell_quote(src) +
                                    " 2>&1",
                                &status);
  std::remove(src.c_str());
  if (status != 0) {
    std::remove(output.c_str());
    throw CompileError("kernel compilation failed (" + tc.cxx + "):\n" + log.substr(0, 4000));
  }
}

}  // namespace openneuron::compiler
