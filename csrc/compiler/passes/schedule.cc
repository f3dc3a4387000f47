#include "compiler/passes/schedule.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "compiler/ir/errors.h"
#include "compiler/ir/view_coords.h"

namespace openneuron::compiler {

namespace {

bool is_leaf(const Node* n) {
  return n->kind == NodeKind::Input || n->kind == NodeKind::ExternOutput || n->materialize;
}

// Non-1 sizes in order: a reshape that keeps them is a squeeze/unsqueeze.
std::vector<Expr> non_unit(const std::vector<Expr>& shape) {
  std::vector<Expr> out;
  for (auto& s : shape)
    if (!s.equals(1)) out.push_back(s);
  return out;
}

bool is_contiguous(const std::vector<Expr>& shape, const std::vector<Expr>& strides) {
  auto expected = contiguous_strides(shape);
  for (size_t i = 0; i < shape.size(); ++i)
    if (!shape[i].equals(1) && strides[i] != expected[i]) return false;
  return true;
}

}  // namespace

bool strided_view(const Node* view, const Node** base_out, std::vector<Expr>* strides_out, Expr* offset_out) {
  if (view->kind != NodeKind::View || view->materialize) return false;
  std::vector<const Node*> chain;
  const Node* base = view;
  while (base->kind == NodeKind::View && !base->materialize) {
    chain.push_back(base);
    base = base->inputs[0];
  }
  if (!is_leaf(base) || base->kind == NodeKind::Constant) return false;
  std::vector<Expr> shape = base->shape, strides;
  Expr offset(0);
  if (base->kind == NodeKind::Input || base->kind == NodeKind::ExternOutput) {
    strides = base->strides;
    offset = base->offset;
  } else {
    strides = base->buffer_strides();
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Node* v = *it;
    std::vector<Expr> next(v->shape.size(), Expr(0));
    if (v->op == "expand") {
      size_t lead = v->shape.size() - shape.size();
      for (size_t i = 0; i < shape.size(); ++i)
        next[lead + i] = (shape[i] == v->shape[lead + i]) ? strides[i] : Expr(0);
    } else if (v->op == "permute") {
      for (size_t i = 0; i < v->dims.size(); ++i) next[i] = strides[v->dims[i]];
    } else if (v->op == "slice") {
      int64_t d = v->view_args[0].value();
      next = strides;
      offset = offset + v->view_args[1] * strides[d];
      next[d] = strides[d] * v->view_args[2];
    } else if (v->op == "select") {
      int64_t d = v->view_args[0].value();
      offset = offset + v->view_args[1] * strides[d];
      next.clear();
      for (size_t i = 0; i < strides.size(); ++i)
        if (static_cast<int64_t>(i) != d) next.push_back(strides[i]);
    } else if (v->op == "as_strided") {
      if (base->kind != NodeKind::Input || it != chain.rbegin()) return false;
      next.assign(v->view_args.begin(), v->view_args.end() - 1);
      offset = v->view_args.back();
    } else if (v->op == "reshape") {
      if (is_contiguous(shape, strides)) {
        next = contiguous_strides(v->shape);
      } else if (non_unit(shape) == non_unit(v->shape)) {
        std::vector<Expr> kept;
        for (size_t i = 0; i < shape.size(); ++i)
          if (!shape[i].equals(1)) kept.push_back(strides[i]);
        size_t k = 0;
        for (size_t i = 0; i < v->shape.size(); ++i)
          next[i] = v->shape[i].equals(1) ? Expr(1) : kept[k++];
      } else {
        return false;
      }
    } else {
      return false;
    }
    shape = v->shape;
    strides = next;
  }
  *base_out = base;
  *strides_out = strides;
  *offset_out = offset;
  return true;
}

namespace {

class Scheduler {
 public:
  Scheduler(Graph& g, const std::set<int>& isolate) : g_(g), isolate_(isolate) {}

  Schedule run() {
    choose_materialization();
    // Host stores (CPU scalars updated in place) come after every kernel,
    // which may all read the old values.
    std::vector<Node*> host_stores;
    for (Node* n : g_.live_nodes()) {
      if (n->is_store() && n->host) host_stores.push_back(n);
      else place(n);
    }
    for (Node* n : host_stores) place(n);
    check_stores();
    plan_memory();
    return std::move(s_);
  }

 private:
  void choose_materialization() {
    auto needs_tensor = [&](Node* n, bool graph_output) {
      if (n->kind != NodeKind::Pointwise && n->kind != NodeKind::Reduce && n->kind != NodeKind::View &&
          n->kind != NodeKind::Constant)
        return;
      if (n->materialize || aliases_.count(n->id)) return;
      if (n->kind == NodeKind::View) {
        // An output that is a view of a computed value must be that view of
        // its base, with PyTorch's strides and offset: AOTAutograd hands it
        // to the backward graph with that layout. So the base gets a buffer.
        Node* root = n;
        while (root->kind == NodeKind::View) root = root->inputs[0];
        if (graph_output && (root->kind == NodeKind::Pointwise || root->kind == NodeKind::Reduce))
          root->materialize = true;
        if (alias_if_strided(n)) return;
        // A reshape of a computed value (a LayerNorm's output flattened for
        // a matmul): the value itself gets the buffer, laid out so the view
        // is a contiguous alias of it, and can stay in its producer's kernel
        // (a buffer of the view's shape would start a kernel of its own).
        if ((root->kind == NodeKind::Pointwise || root->kind == NodeKind::Reduce) && !root->materialize) {
          root->materialize = true;
          if (alias_if_strided(n, /*contiguous_only=*/true)) return;
          root->materialize = false;
        }
      }
      n->materialize = true;
    };
    for (Node* n : g_.live_nodes())
      if (n->is_store()) n->materialize = true;  // its buffer is the input's
    for (auto& o : g_.outputs)
      if (o.node) needs_tensor(o.node, true);
    for (Node* n : g_.live_nodes())
      if (n->kind == NodeKind::Extern)
        for (Node* in : n->inputs) needs_tensor(in, false);
    materialize_shared_heavy_values();
    materialize_shared_pads();
    for (Node* n : g_.live_nodes())
      if (n->host && n->is_compute() && n->materialize && !n->is_store())
        throw ExternNeeded(n->fx_name, "host value needed as a tensor");
  }

  // A padded value read by several views (a pooling window's positions) gets
  // a buffer: reading it through the pad, every read clamps its coordinates
  // and tests the bounds, which keeps the reader's loop from vectorising;
  // reading the buffer is plain strided loads.
  void materialize_shared_pads() {
    for (Node* n : g_.live_nodes())
      if (n->kind == NodeKind::View && n->op == "pad" && n->users.size() > 1) n->materialize = true;
  }

  // Makes view `n` an alias (no buffer of its own) when it is a strided view
  // of a materialized base; with contiguous_only, only when that view is
  // contiguous (what a buffer of its own would have been).
  bool alias_if_strided(Node* n, bool contiguous_only = false) {
    const Node* base;
    std::vector<Expr> strides;
    Expr offset;
    if (!strided_view(n, &base, &strides, &offset)) return false;
    if (contiguous_only && (!offset.equals(0) || !is_contiguous(n->shape, strides))) return false;
    aliases_.insert(n->id);
    return true;
  }

  // A pointwise value with several users that reads many buffers (a sum of
  // gradients through every layer) would be recomputed, with all its reads,
  // by each kernel that uses it; it gets a buffer of its own instead
  // (Inductor's realize_reads_threshold plays the same role).
  static constexpr size_t kSharedReadsThreshold = 4;
  void materialize_shared_heavy_values() {
    for (Node* n : g_.live_nodes()) {  // topological: earlier buffers shrink later cones
      if (n->kind != NodeKind::Pointwise || n->materialize || n->host || n->users.size() < 2) continue;
      if (cone(n).leaves.size() >= kSharedReadsThreshold) n->materialize = true;
    }
  }

  struct Cone {
    std::set<Node*> leaves;
    std::set<Node*> reduces;  // non-materialized reductions it reads
  };

  void collect(Node* n, Cone& c, std::set<Node*>& seen, bool top) {
    if (!seen.insert(n).second) return;
    if (!top && (is_leaf(n) || aliases_.count(n->id))) {
      c.leaves.insert(n);
      return;
    }
    if (!top && n->kind == NodeKind::Reduce) {
      c.reduces.insert(n);
      return;
    }
    for (Node* in : n->inputs) collect(in, c, seen, false);
  }

  Cone cone(Node* n) {
    Cone c;
    std::set<Node*> seen;
    collect(n, c, seen, true);
    return c;
  }

  static std::vector<Expr> kept_shape(const KernelGroup& k) {
    std::vector<Expr> s = k.shape;
    for (int64_t d : k.dims) s[d] = Expr(1);
    return s;
  }
  static std::vector<Expr> squeezed_shape(const KernelGroup& k) {
    std::vector<Expr> s;
    for (size_t i = 0; i < k.shape.size(); ++i)
      if (!std::count(k.dims.begin(), k.dims.end(), static_cast<int64_t>(i))) s.push_back(k.shape[i]);
    return s;
  }

  bool fits(const KernelGroup& k, Node* n, const Cone& c) {
    for (Node* leaf : c.leaves) {
      auto it = producer_.find(leaf->id);
      if (it == producer_.end() || it->second < k.position) continue;
      // A reduction or row scalar of this very group is already computed
      // for the current row; anything else made here is not.
      bool same_row = k.kind == KernelGroup::Kind::Reduction && leaf->group == group_index(k) &&
                      (leaf->kind == NodeKind::Reduce || leaf->shape != k.shape);
      if (!same_row) return false;
    }
    for (Node* r : c.reduces)
      if (r->group != group_index(k)) return false;
    if (n->kind == NodeKind::Reduce)
      return k.kind == KernelGroup::Kind::Reduction && n->inputs[0]->shape == k.shape && n->dims == k.dims &&
             reads_reductions_at_row(k, n);
    // A reduction kernel reads its rows in several passes: a store there
    // could overwrite an element a later pass reads, unless nothing reads
    // the input it writes (an eager reduction's output).
    if (n->is_store() && k.kind == KernelGroup::Kind::Reduction && !n->store_into->users.empty()) return false;
    if (k.kind == KernelGroup::Kind::Pointwise) return c.reduces.empty() && n->shape == k.shape;
    return (n->shape == k.shape || n->shape == kept_shape(k) || n->shape == squeezed_shape(k)) &&
           reads_reductions_at_row(k, n);
  }

  int group_index(const KernelGroup& k) const { return static_cast<int>(&k - s_.groups.data()); }

  // A reduction kernel computes its reductions once per row: a root that
  // reads one of them at another row (a view moved the index) cannot join
  // it. Followed as code generation follows it: from the root's own
  // coordinates through its computed cone (the group's roots are computed
  // inline, other buffers are loaded), views mapping the coordinates.
  bool reads_reductions_at_row(const KernelGroup& k, Node* n) {
    const int gi = group_index(k);
    std::vector<Expr> full(k.shape.size()), row(k.shape.size(), Expr(0)), squeezed;
    for (size_t d = 0; d < k.shape.size(); ++d) {
      const bool reduced = std::count(k.dims.begin(), k.dims.end(), static_cast<int64_t>(d)) > 0;
      // (a kept dim of size 1 has coordinate 0, as the row loop gives it;
      // reduced dims keep their loop variable whatever their size)
      full[d] = !reduced && k.shape[d].equals(1) ? Expr(0)
                                                 : Expr::symbol((reduced ? "sched_r" : "sched_k") + std::to_string(d));
      if (!reduced) row[d] = full[d], squeezed.push_back(full[d]);
    }
    const std::string row_key = join_keys(row);
    std::set<std::string> seen;
    bool ok = true;
    std::function<void(Node*, const std::vector<Expr>&, bool)> visit = [&](Node* x, const std::vector<Expr>& c,
                                                                            bool top) {
      if (!ok || !seen.insert(std::to_string(x->id) + "@" + join_keys(c)).second) return;
      if (!top && x->kind == NodeKind::Reduce && x->group == gi) {
        ok = join_keys(c) == row_key;
        return;
      }
      if (x->host || x->kind == NodeKind::Input || x->kind == NodeKind::ExternOutput ||
          x->kind == NodeKind::Constant || aliases_.count(x->id))
        return;
      if (!top && x->materialize && x->group != gi) return;  // loaded from its buffer
      if (x->kind == NodeKind::Reduce) {  // the root itself: its input over the row
        visit(x->inputs[0], full, false);
        return;
      }
      if (x->kind == NodeKind::View) {
        if (x->op == "as_strided") return;  // a load of its (materialized) input
        if (x->op == "pad") {
          std::vector<Expr> ic(c.size());
          for (size_t d = 0; d < c.size(); ++d) ic[d] = c[d] - x->view_args[d];
          visit(x->inputs[0], ic, false);
          return;
        }
        visit(x->inputs[0], view_input_coords(x, c), false);
        return;
      }
      if (x->op == "iota") return;
      for (Node* in : x->inputs) visit(in, c, false);
    };
    const std::vector<Expr>& start = n->kind == NodeKind::Reduce || n->shape.size() == k.shape.size()
                                         ? (n->shape == k.shape || n->kind == NodeKind::Reduce ? full : row)
                                         : squeezed;
    visit(n, start, true);
    return ok;
  }

  void place(Node* n) {
    if (n->kind == NodeKind::Extern) {
      int pos = add_step({Step::Kind::Extern, -1, n});
      for (Node* in : n->inputs) {
        note_read(in, pos);
        last_extern_use_[buffer_of(in)->id] = pos;  // it may write in place (index_put_)
      }
      for (Node* u : n->users) producer_[u->id] = pos;
      return;
    }
    if (n->kind == NodeKind::Input || n->kind == NodeKind::ExternOutput) return;
    if (aliases_.count(n->id)) {
      producer_[n->id] = add_step({Step::Kind::Alias, -1, n});
      note_read(n, producer_[n->id]);
      return;
    }
    bool root = n->kind == NodeKind::Reduce || n->materialize;
    if (!root) return;
    Cone c = cone(n);
    cones_[n->id] = c;
    KernelGroup* last = s_.groups.empty() ? nullptr : &s_.groups.back();
    if (KernelGroup* related = n->is_store() && !n->host && !isolate_.count(n->id) ? related_group(n, c) : nullptr)
      last = related;
    else if (!last || isolate_.count(n->id) || !fits(*last, n, c)) {
      for (Node* r : c.reduces) {
        r->materialize = true;
        producer_[r->id] = s_.groups[r->group].position;
      }
      KernelGroup k;
      if (n->kind == NodeKind::Reduce) {
        k.kind = KernelGroup::Kind::Reduction;
        k.shape = n->inputs[0]->shape;
        k.dims = n->dims;
      } else {
        k.shape = n->shape;
      }
      k.position = static_cast<int>(s_.steps.size());
      s_.groups.push_back(k);
      add_step({Step::Kind::Kernel, static_cast<int>(s_.groups.size()) - 1, nullptr});
      last = &s_.groups.back();
    }
    last->roots.push_back(n);
    n->group = group_index(*last);
    producer_[n->id] = last->position;
    group_leaves_.resize(s_.groups.size());
    for (Node* leaf : c.leaves) {
      group_leaves_[n->group].insert(buffer_of(leaf)->id);
      note_read(leaf, last->position);
    }
  }

  void note_read(Node* n, int step) {
    int& last = last_read_[buffer_of(n)->id];
    last = std::max(last, step);
  }

  // Stores come last in the graph, one per updated input; computing each in
  // the kernel that already reads what it reads (an optimizer's parameter,
  // moments and gradient) saves a pass over them. The group must fit, read
  // nothing made at or after it, come after every read of the input, and
  // after every extern that took what the store reads (it may have updated
  // it in place).
  KernelGroup* related_group(Node* n, const Cone& c) {
    auto at = [](const std::map<int, int>& steps, int id) {
      auto it = steps.find(id);
      return it == steps.end() ? 0 : it->second;
    };
    int earliest = at(last_read_, n->store_into->id);
    for (Node* leaf : c.leaves) earliest = std::max(earliest, at(last_extern_use_, buffer_of(leaf)->id));
    KernelGroup* best = nullptr;
    size_t best_shared = 0;
    for (size_t i = s_.groups.size(); i-- > 0;) {
      KernelGroup& k = s_.groups[i];
      if (k.position < earliest) break;
      size_t shared = 0;
      for (Node* leaf : c.leaves) shared += group_leaves_[i].count(buffer_of(leaf)->id);
      if (shared > best_shared && fits(k, n, c)) {
        best = &k;
        best_shared = shared;
      }
    }
    return best;
  }

  // A store overwrites its input at its kernel's step, so every other read
  // of that input (directly, through a view, or through an extern's result
  // that may alias it) must come at an earlier step. Reads inside the
  // store's own kernel are checked by code generation.
  void check_stores() {
    std::map<int, Node*> store_of;  // input id -> its store
    for (Node* n : g_.live_nodes()) {
      if (!n->is_store()) continue;
      if (!store_of.emplace(n->store_into->id, n).second)
        throw ExternNeeded(n->fx_name, "second store into one input");
    }
    if (store_of.empty()) return;
    std::map<int, int> memory_of;  // extern output id -> stored input it may be a view of
    auto input_read = [&](Node* n) -> int {
      int id = buffer_of(n)->id;
      auto it = memory_of.find(id);
      return it == memory_of.end() ? id : it->second;
    };
    for (size_t i = 0; i < s_.steps.size(); ++i) {
      const Step& st = s_.steps[i];
      std::vector<Node*> reads;
      if (st.kind == Step::Kind::Kernel) {
        for (Node* r : s_.groups[st.group].roots)
          for (Node* leaf : cones_[r->id].leaves) reads.push_back(leaf);
      } else if (st.kind == Step::Kind::Extern) {
        reads = st.node->inputs;
      } else {
        reads = {st.node};
      }
      for (Node* n : reads) {
        int input = input_read(n);
        auto it = store_of.find(input);
        if (it == store_of.end()) continue;
        Node* store = it->second;
        if (static_cast<int>(i) > s_.groups[store->group].position)
          throw ExternNeeded(store->fx_name, "store before a read of the old value");
        if (st.kind == Step::Kind::Extern && st.node->may_alias_inputs)
          for (Node* u : st.node->users) memory_of[u->id] = input;
      }
    }
  }

  int add_step(Step step) {
    s_.steps.push_back(step);
    return static_cast<int>(s_.steps.size()) - 1;
  }

  // Buffers die after their last reader; a kernel output takes over the
  // buffer of a dead one with the same dtype and element count.
  // Reused buffers are re-viewed contiguously, so only those take part.
  static bool contiguous_layout(const Node* n) { return n->buffer_strides() == contiguous_strides(n->shape); }

  // The node whose buffer an alias (or any other node) reads.
  Node* buffer_of(Node* n) {
    if (!aliases_.count(n->id)) return n;
    const Node* base = nullptr;
    std::vector<Expr> strides;
    Expr offset;
    if (!strided_view(n, &base, &strides, &offset))
      throw CompileError("internal: alias node %" + std::to_string(n->id) + " is no strided view");
    return const_cast<Node*>(base);
  }

  void plan_memory() {
    std::map<int, int> last_use;
    auto read = [&](Node* n, int step) {
      last_use[n->id] = std::max(last_use[n->id], step);
      Node* base = buffer_of(n);
      last_use[base->id] = std::max(last_use[base->id], step);
    };
    // Buffers an extern reads may live on in its results (views), so their
    // memory is never handed to another buffer.
    std::set<int> extern_read;
    for (size_t i = 0; i < s_.steps.size(); ++i) {
      const Step& st = s_.steps[i];
      if (st.kind == Step::Kind::Extern) {
        for (Node* in : st.node->inputs) {
          read(in, static_cast<int>(i));
          extern_read.insert(in->id);
          extern_read.insert(buffer_of(in)->id);
        }
      } else if (st.kind == Step::Kind::Alias) {
        read(st.node, static_cast<int>(i));
      } else {
        for (Node* r : s_.groups[st.group].roots)
          for (Node* leaf : cones_[r->id].leaves) read(leaf, static_cast<int>(i));
      }
    }
    std::set<int> pinned;  // never freed or reused: outputs, inputs and stores into inputs
    for (auto& o : g_.outputs) {
      if (!o.node) continue;
      pinned.insert(o.node->id);
      pinned.insert(buffer_of(o.node)->id);
    }
    for (Node* n : g_.live_nodes())
      if (n->is_store()) pinned.insert(n->id);
    s_.frees.assign(s_.steps.size(), {});
    s_.reuse_of.assign(g_.nodes().size(), -1);
    std::map<std::string, std::vector<int>> free_pool;  // dtype|numel -> dead kernel buffers
    auto pool_key = [](const Node* n) { return std::string(dtype_name(n->dtype)) + "|" + n->numel().key(); };
    for (size_t i = 0; i < s_.steps.size(); ++i) {
      const Step& st = s_.steps[i];
      if (st.kind == Step::Kind::Kernel) {
        for (Node* r : s_.groups[st.group].roots) {
          if (!r->materialize || pinned.count(r->id) || !contiguous_layout(r)) continue;
          auto& pool = free_pool[pool_key(r)];
          if (!pool.empty()) {
            s_.reuse_of[r->id] = pool.back();
            pool.pop_back();
            ++s_.buffers_reused;
          }
        }
      }
      for (auto& [id, step] : last_use) {
        if (step != static_cast<int>(i) || pinned.count(id)) continue;
        Node* n = g_.nodes()[id].get();
        if (n->kind == NodeKind::Input) continue;
        s_.frees[i].push_back(id);
        if (n->materialize && n->kind != NodeKind::ExternOutput && !aliases_.count(id) && !extern_read.count(id) &&
            contiguous_layout(n))
          free_pool[pool_key(n)].push_back(id);
      }
    }
  }

  Graph& g_;
  const std::set<int>& isolate_;
  Schedule s_;
  std::set<int> aliases_;
  std::map<int, int> producer_;  // node id -> step that makes its buffer
  std::map<int, Cone> cones_;
  std::vector<std::set<int>> group_leaves_;  // per group: buffers its roots read
  std::map<int, int> last_read_;             // buffer id -> last step reading it
  std::map<int, int> last_extern_use_;       // buffer id -> last extern step taking it
};

}  // namespace

Schedule schedule_graph(Graph& g, const std::set<int>& isolate) {
  g.compute_users();
  return Scheduler(g, isolate).run();
}

}  // namespace openneuron::compiler
