#include "compiler/compile.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "compiler/cache/kernel_cache.h"
#include "compiler/cache/sha256.h"
#include "compiler/codegen/combined_launch.h"
#include "compiler/codegen/target.h"
#include "compiler/ir/errors.h"
#include "compiler/kernel_builds.h"
#include "compiler/lower/lower.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/schedule.h"

namespace openneuron::compiler {

namespace {

KernelCache& cache_for(const CacheOptions& options) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<KernelCache>> caches;
  std::string key = options.directory + "|" + std::to_string(options.max_bytes) + "|" +
                    std::to_string(options.enabled) + "|" + std::to_string(options.explain_misses);
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = caches[key];
  if (!slot) slot = std::make_unique<KernelCache>(options);
  return *slot;
}

CacheOptions cache_options(const Json& options) {
  CacheOptions co;
  co.directory = options.get("cache_dir").is_string() ? options.at("cache_dir").as_string() : "/tmp/openneuron-kernels";
  if (options.get("cache_max_bytes").is_int()) co.max_bytes = options.at("cache_max_bytes").as_int();
  co.enabled = !options.get("cache_enabled").is_bool() || options.at("cache_enabled").as_bool();
  co.explain_misses =
      !options.get("cache_explain_misses").is_bool() || options.at("cache_explain_misses").as_bool();
  return co;
}

// The target named by the options ("target"; the C++ target by default).
const Target& target_for(const Json& options) {
  return find_target(options.get("target").is_string() ? options.at("target").as_string() : "cpp");
}

Json exprs_python(const std::vector<Expr>& v) {
  Json out = Json::array();
  for (auto& e : v) out.push(Json::string(e.python()));
  return out;
}

// "reduction: sum, div, sub" -- the kind and the ops of a group's roots, for
// profiler labels and debug dumps.
std::string group_summary(const KernelGroup& g) {
  std::string out = g.kind == KernelGroup::Kind::Reduction ? "reduction:" : "pointwise:";
  std::vector<std::string> ops;
  for (const Node* r : g.roots)
    if (std::find(ops.begin(), ops.end(), r->op) == ops.end()) ops.push_back(r->op);
  for (size_t i = 0; i < ops.size() && i < 6; ++i) out += (i ? ", " : " ") + ops[i];
  if (ops.size() > 6) out += ", ...";
  return out;
}

Json tensor_info(const Node* n) {
  Json j = Json::object();
  j.set("id", Json::integer(n->id));
  j.set("dtype", Json::string(dtype_name(n->dtype)));
  j.set("shape", exprs_python(n->shape));
  return j;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Lowering, passes, fusion and code generation of one graph.
struct Build {
  Build(const Json& fx, const std::set<int>& isolate, const std::set<std::string>& forced_externs,
        const std::vector<std::string>& symbols, const Target& target)
      : started(std::chrono::steady_clock::now()), lowered(lower_fx_graph(fx, forced_externs)) {
    Graph& g = lowered.graph;
    stats = Json::object();
    stats.set("ir_nodes_lowered", Json::integer(static_cast<int64_t>(g.live_nodes().size())));
    ir_before = g.to_string();
    int dce = eliminate_dead_code(g);
    int folded = fold_constants(g);
    int views = simplify_views(g);
    int cse = eliminate_common_subexpressions(g);
    dce += eliminate_dead_code(g);
    stats.set("dead_code_removed", Json::integer(dce));
    stats.set("constants_folded", Json::integer(folded));
    stats.set("views_simplified", Json::integer(views));
    stats.set("common_subexpressions", Json::integer(cse));
    schedule = schedule_graph(g, isolate);
    stats.set("lower_seconds", Json::number(seconds_since(started)));
    const auto codegen_started = std::chrono::steady_clock::now();
    // Kernels are named after their content: identical layers give one
    // kernel, built once (kernel_builds.h).
    std::set<std::string> seen;
    for (const KernelGroup& group : schedule.groups) {
      kernels.push_back(target.kernel(group, kSelfName, symbols));
      name_by_content(kernels.back(), kSelfName);
      if (seen.insert(kernels.back().name).second) distinct.push_back(&kernels.back() - kernels.data());
    }
    if (target.combines_small_kernels()) launches = combine_small_kernels(schedule, kernels);
    // The combined launches, with the kernels they call, are a library of
    // their own; the other kernels are built and found one by one.
    std::set<std::string> in_launch, standalone;
    for (const CombinedLaunch& l : launches) {
      for (int st : l.steps)
        if (in_launch.insert(kernels[schedule.steps[st].group].name).second)
          launch_library.source += kernels[schedule.steps[st].group].source + "\n";
      launch_library.names.push_back(l.name);
    }
    for (const CombinedLaunch& l : launches)
      launch_library.source += target.combined_launch(l, schedule, kernels, symbols.size());
    std::set<int> launched;
    for (const CombinedLaunch& l : launches) launched.insert(l.steps.begin(), l.steps.end());
    for (size_t i = 0; i < schedule.steps.size(); ++i)
      if (schedule.steps[i].kind == Step::Kind::Kernel && !launched.count(static_cast<int>(i)))
        standalone.insert(kernels[schedule.steps[i].group].name);
    for (size_t i : distinct)
      if (standalone.count(kernels[i].name)) standalone_kernels.push_back(kernels[i]);
    for (const std::string& name : in_launch) launch_library.only_kernels += !standalone.count(name);
    stats.set("codegen_seconds", Json::number(seconds_since(codegen_started)));
  }
  // The source of debug dumps: every distinct kernel once.
  std::string source(const Target& target) const {
    std::string out = target.prelude();
    for (const GeneratedKernel& k : standalone_kernels) out += "\n" + k.source;
    return out + "\n" + launch_library.source;
  }
  static constexpr const char* kSelfName = "on_kernel_self";
  std::chrono::steady_clock::time_point started;  // declared before lowered: timed from here
  LoweredGraph lowered;
  Schedule schedule;
  std::vector<GeneratedKernel> kernels;
  std::vector<size_t> distinct;  // first kernel of each content
  std::vector<GeneratedKernel> standalone_kernels;  // distinct kernels launched on their own
  std::vector<CombinedLaunch> launches;
  LaunchLibrary launch_library;
  std::string ir_before;
  Json stats;
};

}  // namespace

std::string compile_graph(const std::string& graph_json, const std::string& options_json) {
  Json options = options_json.empty() ? Json::object() : Json::parse(options_json);
  bool debug = options.get("debug").is_bool() && options.get("debug").as_bool();
  Json fx = Json::parse(graph_json);
  const Target& target = target_for(options);

  // Symbols in a fixed order: every kernel receives all of them.
  std::vector<std::string> symbols;
  for (auto& sym : fx.at("symbols").items()) symbols.push_back(sym.as_string());

  // Lowering and passes are deterministic and cheap, so a fusion conflict
  // found by code generation restarts them with that root isolated, and a
  // store that cannot write in place, or a host value needed as a tensor,
  // with that FX node left to an extern.
  std::set<int> isolate;
  std::set<std::string> forced_externs;
  std::unique_ptr<Build> built;
  int fusion_retries = 0;
  while (!built) {
    try {
      built = std::make_unique<Build>(fx, isolate, forced_externs, symbols, target);
    } catch (const FusionConflict& c) {
      // The scheduler's legality check missed one (see FusionConflict).
      ++fusion_retries;
      if (!isolate.insert(c.root).second) throw CompileError(std::string("internal: ") + c.what());
    } catch (const ExternNeeded& c) {
      if (!forced_externs.insert(c.fx_name).second) throw CompileError(std::string("internal: ") + c.what());
      isolate.clear();  // node ids change with the lowering
    }
  }
  LoweredGraph& lowered = built->lowered;
  Schedule& s = built->schedule;
  std::vector<GeneratedKernel>& kernels = built->kernels;
  Json plan = Json::object();
  Json stats = built->stats;
  if (debug) plan.set("ir_before", Json::string(built->ir_before));
  if (debug) plan.set("ir_after", Json::string(lowered.graph.to_string()));
  Graph& g = lowered.graph;
  stats.set("kernels", Json::integer(static_cast<int64_t>(kernels.size())));
  // Graphs code generation had to schedule again (0 when the scheduler's
  // fusion legality matches the writer's).
  stats.set("fusion_retries", Json::integer(fusion_retries));
  stats.set("buffers_reused", Json::integer(s.buffers_reused));
  stats.set("kernels_distinct", Json::integer(static_cast<int64_t>(built->distinct.size())));
  if (debug) plan.set("source", Json::string(built->source(target)));

  // The kernels' libraries, from the persistent cache or built.
  auto t1 = std::chrono::steady_clock::now();
  KernelBuilds builds;
  if (!kernels.empty()) {
    const int threads = options.get("build_threads").is_int() ? static_cast<int>(options.at("build_threads").as_int())
                                                               : static_cast<int>(std::thread::hardware_concurrency());
    builds = build_kernels(target, cache_for(cache_options(options)), built->standalone_kernels,
                           built->launch_library, threads);
    Json libraries = Json::array();
    bool all_hit = true;
    for (const BuiltLibrary& l : builds.libraries) {
      Json j = Json::object();
      j.set("source_digest", Json::string(l.source_digest));
      j.set("path", Json::string(l.path));
      j.set("hit", Json::boolean(l.hit));
      libraries.push(j);
      all_hit &= l.hit;
    }
    plan.set("libraries", libraries);
    Json cache = Json::object();
    cache.set("hit", Json::boolean(all_hit));
    cache.set("miss_reason", Json::string(builds.miss_reason));
    plan.set("cache", cache);
    stats.set("kernels_built", Json::integer(builds.kernels_built));
    stats.set("kernels_found", Json::integer(builds.kernels_found));
  }
  stats.set("build_seconds", Json::number(seconds_since(t1)));

  // Steps; a combined launch is one step for all of its kernels.
  std::map<int, const CombinedLaunch*> launch_at;  // first step -> its launch
  std::set<int> in_launch;
  for (const CombinedLaunch& l : built->launches) {
    launch_at[l.steps.front()] = &l;
    in_launch.insert(l.steps.begin() + 1, l.steps.end());
  }
  Json steps = Json::array();
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    if (in_launch.count(static_cast<int>(i))) continue;
    Json j = Json::object();
    if (st.kind == Step::Kind::Kernel) {
      auto launch = launch_at.find(static_cast<int>(i));
      std::vector<int> members = launch == launch_at.end() ? std::vector<int>{static_cast<int>(i)}
                                                           : launch->second->steps;
      j.set("kind", Json::string("kernel"));
      Json bufs = Json::array(), allocs = Json::array(), frees = Json::array();
      std::string summary;
      for (int m : members) {
        const GeneratedKernel& k = kernels[s.steps[m].group];
        if (m == members.front()) summary = group_summary(s.groups[s.steps[m].group]);
        for (Node* b : k.buffers) bufs.push(Json::integer(b->id));
        for (size_t o = k.buffers.size() - k.num_outputs; o < k.buffers.size(); ++o) {
          Node* n = k.buffers[o];
          Json a = tensor_info(n);
          a.set("stride", exprs_python(n->buffer_strides()));
          int reuse = s.reuse_of[n->id];
          a.set("reuse", reuse >= 0 ? Json::integer(reuse) : Json());
          if (n->is_store()) a.set("input", Json::integer(n->store_into->index));  // written in place
          allocs.push(a);
        }
        for (int id : s.frees[m]) frees.push(Json::integer(id));
      }
      if (members.size() > 1) summary = std::to_string(members.size()) + " kernels, first " + summary;
      const std::string entry = members.size() > 1 ? launch->second->name : kernels[st.group].name;
      j.set("name", Json::string(entry));
      j.set("library", Json::string(builds.libraries[builds.library_of.at(entry)].path));
      Json grid = Json::array();
      for (int64_t g : target.launch_grid(s.groups[st.group])) grid.push(Json::integer(g));
      j.set("grid", grid);
      j.set("summary", Json::string(summary));
      j.set("buffers", bufs);
      j.set("allocs", allocs);
      j.set("free", frees);
      steps.push(j);
      continue;
    } else if (st.kind == Step::Kind::Extern) {
      j.set("kind", Json::string("extern"));
      j.set("fx", Json::string(st.node->fx_name));
      j.set("target", Json::string(st.node->op));
      Json args = Json::object();  // FX name -> IR node holding its tensor
      for (auto& [name, index] : st.node->arg_names) args.set(name, Json::integer(st.node->inputs[index]->id));
      j.set("args", args);
      Json outs = Json::array();
      for (Node* u : st.node->users) {
        // Results nothing reads (most items of a foreach op's list) are not bound.
        if (u->kind != NodeKind::ExternOutput || u->dead || (u->users.empty() && !u->graph_output)) continue;
        Json o = tensor_info(u);
        o.set("index", Json::integer(u->index));
        o.set("stride", exprs_python(u->strides));
        outs.push(o);
      }
      j.set("outputs", outs);
    } else {
      const Node* base;
      std::vector<Expr> strides;
      Expr offset;
      strided_view(st.node, &base, &strides, &offset);
      j.set("kind", Json::string("alias"));
      j.set("id", Json::integer(st.node->id));
      j.set("base", Json::integer(base->id));
      j.set("shape", exprs_python(st.node->shape));
      j.set("stride", exprs_python(strides));
      j.set("offset", Json::string(offset.python()));
    }
    Json frees = Json::array();
    for (int id : s.frees[i]) frees.push(Json::integer(id));
    j.set("free", frees);
    steps.push(j);
  }
  plan.set("steps", steps);
  plan.set("target", Json::string(target.name()));
  int64_t launches = 0;
  for (auto& st : steps.items()) launches += st.at("kind").as_string() == "kernel";
  stats.set("kernel_launches", Json::integer(launches));

  Json inputs = Json::array();
  for (Node* in : g.inputs) inputs.push(in && !in->dead ? Json::integer(in->id) : Json());
  plan.set("inputs", inputs);
  Json outputs = Json::array();
  for (auto& o : g.outputs) {
    Json j = Json::object();
    switch (o.kind) {
      case GraphOutput::Kind::Tensor: j.set("kind", Json::string("tensor")); j.set("id", Json::integer(o.node->id)); break;
      case GraphOutput::Kind::SymInt: j.set("kind", Json::string("sym")); j.set("expr", Json::string(o.expr.python())); break;
      case GraphOutput::Kind::Int: j.set("kind", Json::string("number")); j.set("value", Json::integer(static_cast<int64_t>(o.number))); break;
      case GraphOutput::Kind::Float: j.set("kind", Json::string("number")); j.set("value", Json::number(o.number)); break;
      case GraphOutput::Kind::None: j.set("kind", Json::string("none")); break;
      case GraphOutput::Kind::Input: j.set("kind", Json::string("input")); j.set("index", Json::integer(o.input_index)); break;
      case GraphOutput::Kind::Host: j.set("kind", Json::string("host")); j.set("name", Json::string(o.fx_name)); break;
    }
    outputs.push(j);
  }
  plan.set("outputs", outputs);
  Json fallbacks = Json::array();
  for (auto& f : lowered.fallbacks) {
    Json j = Json::object();
    j.set("op", Json::string(f.op));
    j.set("reason", Json::string(f.reason));
    fallbacks.push(j);
  }
  plan.set("fallbacks", fallbacks);
  Json externs = Json::array();
  for (auto& e : lowered.externs) externs.push(Json::string(e));
  plan.set("externs", externs);
  plan.set("stats", stats);
  return plan.dump();
}

std::string kernel_library(const std::string& options_json) {
  Json options = options_json.empty() ? Json::object() : Json::parse(options_json);
  const Target& target = target_for(options);
  const std::string source = target.library_source();
  Json out = Json::object();
  if (source.empty()) {
    out.set("library", Json());
    return out.dump();
  }
  const CacheKey key = library_cache_key(sha256_hex(source), target);
  CacheResult r = cache_for(cache_options(options)).get_or_build(
      key, [&](const std::string& tmp) { target.build(source, tmp); });
  out.set("library", Json::string(r.path));
  out.set("hit", Json::boolean(r.hit));
  return out.dump();
}

std::string find_kernel_library(const std::string& source_digest, const std::string& options_json) {
  Json options = options_json.empty() ? Json::object() : Json::parse(options_json);
  const CacheKey key = library_cache_key(source_digest, target_for(options));
  CacheResult r = cache_for(cache_options(options)).find(key);
  Json out = Json::object();
  out.set("hit", Json::boolean(r.hit));
  out.set("library", Json::string(r.path));
  out.set("miss_reason", Json::string(r.miss_reason));
  out.set("key", Json::string(key.digest()));
  return out.dump();
}

}  // namespace openneuron::compiler
