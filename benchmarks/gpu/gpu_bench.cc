// The torch-free GPU benchmark (issue 29): the HAL and the compiler's
// kernel library on one device of a driver (vulkan by default), no PyTorch.
// Measures device copy bandwidth, dispatch latency (empty and tiny kernels,
// back to back) and matmul TFLOP/s over square and transformer shapes;
// prints a table and writes JSON (--json PATH) that
// benchmarks/gpu/cuda_reference.py compares with PyTorch CUDA on the same
// GPU. Each figure is the best of --repeats timed rounds (after a warm-up);
// times are wall clock from the first enqueue to the queue's completion.
//
//   gpu_bench [--quick] [--json PATH] [--device N] [--repeats N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "compiler/codegen/gemm_launch.h"
#include "compiler/compile.h"
#include "compiler/ir/json.h"
#include "hal/driver.h"
#include "hal/error.h"

namespace on = openneuron;
using on::compiler::Json;

namespace {

struct Options {
  bool quick = false;
  std::string json_path;
  int device = 0;
  int repeats = 5;
};

struct Result {
  std::string name, unit;
  double value;
  std::string note;
};

double seconds_of(const std::function<void()>& enqueue, on::hal::Queue& queue) {
  const auto start = std::chrono::steady_clock::now();
  enqueue();
  queue.synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The best (shortest) of `repeats` timed rounds, after one untimed round.
double best_seconds(const std::function<void()>& enqueue, on::hal::Queue& queue, int repeats) {
  seconds_of(enqueue, queue);
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) best = std::min(best, seconds_of(enqueue, queue));
  return best;
}

// Device memory freed when it goes out of scope.
class Buffer {
 public:
  Buffer(on::hal::Driver& d, int device, size_t bytes) : driver_(d), device_(device), bytes_(bytes) {
    ptr_ = d.allocate(device, bytes);
    if (!ptr_) throw on::hal::Error("out of device memory allocating " + std::to_string(bytes) + " bytes");
  }
  ~Buffer() { driver_.free(device_, ptr_, bytes_); }
  void* get() const { return ptr_; }

 private:
  on::hal::Driver& driver_;
  int device_;
  size_t bytes_;
  void* ptr_;
};

int64_t double_bits(double v) {
  int64_t out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}

// A float16's value (normal numbers and zero: the spot checks' values).
double half_to_double(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  if (exponent == 0) return 0.0;
  const double value = std::ldexp(1.0 + (h & 0x3ff) / 1024.0, exponent - 15);
  return (h & 0x8000) ? -value : value;
}

class Bench {
 public:
  Bench(const Options& o) : o_(o), driver_(on::hal::driver()) {
    props_ = driver_.properties(o.device);
    queue_ = driver_.create_queue(o.device, 0);
    Json options = Json::object();
    options.set("target", Json::string(props_.kernel_target));
    if (const char* dir = std::getenv("OPENNEURON_COMPILE_CACHE_DIR")) options.set("cache_dir", Json::string(dir));
    const Json library = Json::parse(on::compiler::kernel_library(options.dump()));
    if (!library.at("library").is_string()) throw on::hal::Error("target " + props_.kernel_target + " has no library");
    library_ = driver_.load_executable(o.device, library.at("library").as_string());
  }

  void copy_bandwidth() {
    const size_t bytes = std::min<size_t>(o_.quick ? size_t{32} << 20 : size_t{1} << 30, props_.max_allocation / 2);
    Buffer a(driver_, o_.device, bytes), b(driver_, o_.device, bytes);
    queue_->fill(a.get(), bytes, 0x3f800000u, 4);
    const int reps = o_.quick ? 4 : 20;
    const double s = best_seconds([&] {
      for (int i = 0; i < reps; ++i) queue_->copy_async(b.get(), a.get(), bytes, on::hal::CopyKind::DeviceToDevice);
    }, *queue_, o_.repeats);
    add({"device copy " + std::to_string(bytes >> 20) + " MiB (read + write)", "GB/s", 2.0 * bytes * reps / s / 1e9,
         ""});
  }

  // Back-to-back dispatches of the gemm entry on an empty product (the
  // kernel returns at once) and a 1x1x1 product (a one-element kernel).
  void dispatch_latency() {
    Buffer buf(driver_, o_.device, 64);
    queue_->fill(buf.get(), 64, 0, 4);
    const int entry = library_->entry("gemm_f32");
    for (int64_t size : {0, 1}) {
      const std::vector<int64_t> scalars = {1, size, size, size, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1,
                                            double_bits(1.0), 0};
      const on::hal::DeviceAddress bindings[] = {buf.get(), buf.get(), buf.get(), buf.get()};
      const int reps = o_.quick ? 200 : 2000;
      const double s = best_seconds([&] {
        for (int i = 0; i < reps; ++i) queue_->dispatch(*library_, entry, bindings, scalars, on::hal::Grid{1, 1, 1});
      }, *queue_, o_.repeats);
      add({size == 0 ? "dispatch, empty kernel (back to back)" : "dispatch, 1-element kernel (back to back)", "us",
           s / reps * 1e6, ""});
      if (size != 0) continue;
      // The host's share: enqueueing alone (recording, batching), the
      // device's work not waited for.
      double host = 1e30;
      for (int r = 0; r < o_.repeats; ++r) {
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) queue_->dispatch(*library_, entry, bindings, scalars, on::hal::Grid{1, 1, 1});
        host = std::min(host, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        queue_->synchronize();
      }
      add({"dispatch, host time to enqueue one", "us", host / reps * 1e6, ""});
    }
  }

  // C[m, n] = A[m, k] B[k, n]; `b_transposed`: B stored [n, k] (a linear
  // layer's weight), read in place. `half`: float16 operands and result
  // (float32 accumulation), on the matrix units where the device has them.
  void matmul(int64_t m, int64_t n, int64_t k, bool b_transposed, const std::string& label, bool half = false) {
    const int64_t size = half ? 2 : 4;
    const uint32_t one_hundredth = half ? 0x211f211fu : 0x3c23d70au;  // 0.01 as float16 (twice) or float
    Buffer a(driver_, o_.device, m * k * size), b(driver_, o_.device, k * n * size), c(driver_, o_.device, m * n * size);
    queue_->fill(a.get(), m * k * size, one_hundredth, 4);
    queue_->fill(b.get(), k * n * size, one_hundredth, 4);
    on::compiler::GemmShape shape{1, m, n, k, std::max({m * k, k * n, m * n}) - 1};
    using MatrixUnits = on::hal::DeviceProperties::MatrixUnits;
    const std::string matrix_entry =
        half ? on::compiler::float16_matrix_entry(props_.matrix_units == MatrixUnits::kCooperative,
                                                  props_.matrix_units == MatrixUnits::kEmulated)
             : "";
    on::compiler::GemmLaunch launch = on::compiler::gemm_launch(
        shape, !half, props_.tiled_kernels, props_.compute_units, props_.max_workgroups, half, matrix_entry);
    // The C++ target's kernels take one workgroup per thread.
    if (props_.kernel_target == "cpp") launch.workgroups = std::max(1u, std::thread::hardware_concurrency());
    const std::string suffix = half ? "_f16" : "_f32";
    const int entry = library_->entry(launch.entry + suffix);
    const int64_t b_k = b_transposed ? 1 : n, b_n = b_transposed ? k : 1;
    std::vector<int64_t> scalars = {1, m, n, k, 0, k, 1, 0, b_k, b_n, 0, n, 1, 0, n, 1, double_bits(1.0), 0};
    on::hal::DeviceAddress bindings[] = {a.get(), b.get(), c.get(), c.get()};
    if (launch.swap_operands) {
      scalars = on::compiler::swapped_gemm_scalars(scalars);
      std::swap(bindings[0], bindings[1]);
    }
    const double flops = 2.0 * m * n * k;
    const int reps = std::max(1, static_cast<int>(std::min(50.0, (o_.quick ? 2e9 : 2e12) / flops)));
    const double s = best_seconds([&] {
      for (int i = 0; i < reps; ++i)
        queue_->dispatch(*library_, entry, bindings, scalars, on::hal::Grid{launch.workgroups, 1, 1});
    }, *queue_, o_.repeats);
    // Spot check: every element of C is k * 0.01 * 0.01 (0.01 as stored).
    double corner[2];
    for (int i = 0; i < 2; ++i) {
      const char* at = static_cast<char*>(c.get()) + (i == 0 ? 0 : (m * n - 1) * size);
      float v = 0;
      uint16_t bits = 0;
      if (half) driver_.copy(&bits, at, 2, on::hal::CopyKind::DeviceToHost);
      else driver_.copy(&v, at, 4, on::hal::CopyKind::DeviceToHost);
      corner[i] = half ? half_to_double(bits) : v;
    }
    const double element = half ? half_to_double(0x211f) : 0.01f;
    const double want = k * element * element;
    for (double v : corner)
      if (std::abs(v - want) > (half ? 2e-3 : 1e-3) * want + 1e-6)
        throw on::hal::Error("matmul " + label + ": C holds " + std::to_string(v) + ", expected " +
                             std::to_string(want));
    add({std::string(half ? "matmul fp16 " : "matmul fp32 ") + label, "TFLOP/s", flops * reps / s / 1e12,
         launch.entry + suffix});
  }

  // Fused attention forward, causal, q = k = v of [batch, heads, seq, dim]
  // (contiguous); FLOPs of the two products, halved by the causal mask.
  void attention(int64_t batch, int64_t heads, int64_t seq, int64_t dim) {
    const int64_t elements = batch * heads * seq * dim;
    Buffer qkv(driver_, o_.device, elements * 4), out(driver_, o_.device, elements * 4),
        lse(driver_, o_.device, batch * heads * seq * 4);
    queue_->fill(qkv.get(), elements * 4, 0x3c23d70au, 4);  // 0.01f
    const std::string entry_name = "attention_fwd_d" + std::to_string(dim <= 32 ? 32 : dim <= 64 ? 64 : 128) + "_f32";
    const int entry = library_->entry(entry_name);
    const int64_t sb = heads * seq * dim, sh = seq * dim;
    std::vector<int64_t> scalars = {batch, heads, seq, seq, dim, dim};
    for (int t = 0; t < 4; ++t) scalars.insert(scalars.end(), {sb, sh, dim, 1});
    scalars.insert(scalars.end(), {heads * seq, seq, 1, 0, 0, 0, 0, double_bits(1.0 / std::sqrt(double(dim))), 1, 0});
    const on::hal::DeviceAddress bindings[] = {qkv.get(), qkv.get(), qkv.get(), out.get(), lse.get(), out.get()};
    const int64_t groups = std::min<int64_t>(batch * heads * ((seq + 63) / 64), props_.max_workgroups);
    const double flops = 4.0 * batch * heads * seq * seq * dim / 2;
    const int reps = std::max(1, static_cast<int>(std::min(20.0, (o_.quick ? 1e8 : 2e11) / flops)));
    const double s = best_seconds([&] {
      for (int i = 0; i < reps; ++i)
        queue_->dispatch(*library_, entry, bindings, scalars, on::hal::Grid{groups, 1, 1});
    }, *queue_, o_.repeats);
    float first;  // every output is 0.01: the values are all equal
    driver_.copy(&first, out.get(), 4, on::hal::CopyKind::DeviceToHost);
    if (std::abs(first - 0.01f) > 1e-5f) throw on::hal::Error("attention: output " + std::to_string(first));
    add({"attention fwd fp32 causal " + std::to_string(batch) + "x" + std::to_string(heads) + "x" +
             std::to_string(seq) + "x" + std::to_string(dim),
         "TFLOP/s", flops * reps / s / 1e12, entry_name});
  }

  void run() {
    copy_bandwidth();
    dispatch_latency();
    const std::vector<int64_t> squares =
        o_.quick ? std::vector<int64_t>{256, 512} : std::vector<int64_t>{1024, 2048, 4096};
    for (int64_t s : squares) matmul(s, s, s, false, std::to_string(s) + "^3");
    // GPT-2 small's projections at 8 x 512 tokens (2 x 128 with --quick):
    // weights stored [out, in], as nn.Linear keeps them.
    const int64_t tokens = o_.quick ? 256 : 4096;
    const std::string t = std::to_string(tokens);
    matmul(tokens, 2304, 768, true, t + "x768 @ W[2304,768]^T (qkv)");
    matmul(tokens, 3072, 768, true, t + "x768 @ W[3072,768]^T (mlp up)");
    matmul(tokens, 768, 3072, true, t + "x3072 @ W[768,3072]^T (mlp down)");
    // The same at one token (a decode step at batch 1).
    matmul(1, 2304, 768, true, "1x768 @ W[2304,768]^T (decode qkv)");
    matmul(1, 768, 3072, true, "1x3072 @ W[768,3072]^T (decode mlp down)");
    // float16 products: on the matrix units where the device has them.
    if (props_.kernel_target != "cpp" && props_.native_fp16) {
      const int64_t big = o_.quick ? 256 : 8192;
      matmul(big, big, big, false, std::to_string(big) + "^3", true);
      matmul(tokens, 3072, 768, true, t + "x768 @ W[3072,768]^T (mlp up)", true);
    }
    // GPT-2 small's attention at 8 x 512 tokens (2 x 128 with --quick).
    if (props_.kernel_target != "cpp") attention(o_.quick ? 2 : 8, 12, o_.quick ? 128 : 512, 64);
  }

  void report() const {
    std::printf("device: %s (driver %s, %d compute units, subgroup %d, %zu KiB shared memory%s)\n",
                props_.name.c_str(), props_.driver.c_str(), props_.compute_units, props_.subgroup_size,
                props_.shared_memory_bytes / 1024, props_.tiled_kernels ? ", tiled kernels" : "");
    std::printf("%-58s %12s  %-8s %s\n", "benchmark", "value", "unit", "kernel");
    for (const Result& r : results_)
      std::printf("%-58s %12.4g  %-8s %s\n", r.name.c_str(), r.value, r.unit.c_str(), r.note.c_str());
    if (o_.json_path.empty()) return;
    Json out = Json::object(), device = Json::object(), list = Json::array();
    device.set("name", Json::string(props_.name));
    device.set("driver", Json::string(props_.driver));
    device.set("compute_units", Json::integer(props_.compute_units));
    device.set("tiled_kernels", Json::boolean(props_.tiled_kernels));
    for (const Result& r : results_) {
      Json j = Json::object();
      j.set("name", Json::string(r.name));
      j.set("unit", Json::string(r.unit));
      j.set("value", Json::number(r.value));
      j.set("kernel", Json::string(r.note));
      list.push(j);
    }
    out.set("device", device);
    out.set("results", list);
    std::ofstream(o_.json_path) << out.dump() << "\n";
  }

 private:
  void add(Result r) {
    std::fprintf(stderr, "  %s: %.4g %s\n", r.name.c_str(), r.value, r.unit.c_str());
    results_.push_back(std::move(r));
  }

  Options o_;
  on::hal::Driver& driver_;
  on::hal::DeviceProperties props_;
  std::unique_ptr<on::hal::Queue> queue_;
  std::unique_ptr<on::hal::Executable> library_;
  std::vector<Result> results_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gpu_bench: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--quick") o.quick = true;
    else if (arg == "--json") o.json_path = value();
    else if (arg == "--device") o.device = std::atoi(value().c_str());
    else if (arg == "--repeats") o.repeats = std::max(1, std::atoi(value().c_str()));
    else {
      std::fprintf(stderr, "usage: gpu_bench [--quick] [--json PATH] [--device N] [--repeats N]\n");
      return 2;
    }
  }
  if (!std::getenv("OPENNEURON_DRIVER")) setenv("OPENNEURON_DRIVER", "vulkan", 1);
  try {
    Bench bench(o);
    bench.run();
    bench.report();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
