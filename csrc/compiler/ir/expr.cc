#include "compiler/ir/expr.h"

#include <algorithm>
#include <map>
#include <optional>

#include "compiler/ir/errors.h"
#include "compiler/ir/json.h"

namespace openneuron::compiler {

struct Expr::Node {
  Kind kind;
  int64_t value = 0;
  std::string name;
  std::vector<Expr> operands;
  std::string key;
};

static int64_t floordiv_int(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
static int64_t mod_int(int64_t a, int64_t b) { return a - floordiv_int(a, b) * b; }

Expr::Expr(int64_t value) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::Const;
  n->value = value;
  n->key = value < 0 ? "(" + std::to_string(value) + ")" : std::to_string(value);
  node_ = std::move(n);
}

Expr Expr::symbol(const std::string& name) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::Sym;
  n->name = name;
  n->key = name;
  return Expr(std::shared_ptr<const Node>(std::move(n)));
}

Expr::Kind Expr::kind() const { return node_->kind; }
int64_t Expr::value() const { return node_->value; }
const std::string& Expr::name() const { return node_->name; }
const std::vector<Expr>& Expr::operands() const { return node_->operands; }
const std::string& Expr::key() const { return node_->key; }

static std::string join(const std::vector<Expr>& ops, const char* sep) {
  std::string out;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i) out += sep;
    out += ops[i].key();
  }
  return out;
}

Expr Expr::make(Kind kind, std::vector<Expr> operands) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  switch (kind) {
    case Kind::Add: n->key = "(" + join(operands, " + ") + ")"; break;
    case Kind::Mul: n->key = "(" + join(operands, "*") + ")"; break;
    case Kind::FloorDiv: n->key = "on_floordiv(" + join(operands, ", ") + ")"; break;
    case Kind::Mod: n->key = "on_mod(" + join(operands, ", ") + ")"; break;
    case Kind::Max: n->key = "on_max(" + join(operands, ", ") + ")"; break;
    case Kind::Min: n->key = "on_min(" + join(operands, ", ") + ")"; break;
    default: throw CompileError("Expr::make: bad kind");
  }
  n->operands = std::move(operands);
  return Expr(std::shared_ptr<const Node>(std::move(n)));
}

// A product split into its constant coefficient and its sorted symbolic
// factors, so that 2*s0 + 3*s0 folds to 5*s0.
static std::pair<int64_t, std::vector<Expr>> split_term(const Expr& e) {
  if (e.is_const()) return {e.value(), {}};
  if (e.kind() != Expr::Kind::Mul) return {1, {e}};
  int64_t c = 1;
  std::vector<Expr> factors;
  for (auto& f : e.operands()) {
    if (f.is_const()) c *= f.value();
    else factors.push_back(f);
  }
  return {c, factors};
}

Expr product(const std::vector<Expr>& values) {
  Expr out(1);
  for (auto& v : values) out = out * v;
  return out;
}

std::vector<Expr> contiguous_strides(const std::vector<Expr>& shape) {
  std::vector<Expr> strides(shape.size(), Expr(1));
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::string join_keys(const std::vector<Expr>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    out += values[i].key();
  }
  return out + "]";
}

static bool key_less(const Expr& a, const Expr& b) { return a.key() < b.key(); }

Expr operator*(const Expr& a, const Expr& b) {
  if (a.is_const() && b.is_const()) return Expr(a.value() * b.value());
  if (a.equals(0) || b.equals(0)) return Expr(0);
  if (a.equals(1)) return b;
  if (b.equals(1)) return a;
  // Distribute a constant over a sum: keeps sums flat for index math.
  if (a.is_const() && b.kind() == Expr::Kind::Add) {
    Expr out(0);
    for (auto& t : b.operands()) out = out + a * t;
    return out;
  }
  if (b.is_const() && a.kind() == Expr::Kind::Add) return b * a;
  auto [ca, fa] = split_term(a);
  auto [cb, fb] = split_term(b);
  int64_t c = ca * cb;
  std::vector<Expr> factors = fa;
  factors.insert(factors.end(), fb.begin(), fb.end());
  std::sort(factors.begin(), factors.end(), key_less);
  if (c == 0) return Expr(0);
  std::vector<Expr> ops;
  if (c != 1) ops.push_back(Expr(c));
  ops.insert(ops.end(), factors.begin(), factors.end());
  if (ops.size() == 1) return ops[0];
  return Expr::make(Expr::Kind::Mul, std::move(ops));
}

using LikeTerms = std::map<std::string, std::pair<int64_t, std::vector<Expr>>>;

static std::string factors_key(const std::vector<Expr>& f) {
  std::string k;
  for (auto& x : f) k += x.key() + "*";
  return k;
}

// c*F*S*(x // S) + c*F*(x % S) == c*F*x, exactly (x % S is x - (x // S) * S):
// a loop over dims merged into one variable x indexes a tensor whose strides
// span them with c*F*x, no division left. The sum of `like` and `constant`
// with one such pair merged, or nullopt when it has none.
static std::optional<Expr> merge_division_pair(const LikeTerms& like, int64_t constant) {
  for (auto& [mod_key, mod_term] : like) {
    const auto& [c, factors] = mod_term;
    if (c == 0) continue;
    for (size_t i = 0; i < factors.size(); ++i) {
      if (factors[i].kind() != Expr::Kind::Mod) continue;
      const Expr& x = factors[i].operands()[0];
      const Expr& divisor = factors[i].operands()[1];
      std::vector<Expr> rest = factors;
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
      auto [qc, qf] = split_term(Expr(c) * product(rest) * divisor * Expr::floordiv(x, divisor));
      auto quotient = like.find(factors_key(qf));
      if (quotient == like.end() || quotient->second.first != qc) continue;
      Expr sum(constant);
      for (auto& [k, cf] : like)
        if (k != mod_key && k != quotient->first) sum = sum + Expr(cf.first) * product(cf.second);
      return sum + Expr(c) * product(rest) * x;
    }
  }
  return std::nullopt;
}

Expr operator+(const Expr& a, const Expr& b) {
  if (a.is_const() && b.is_const()) return Expr(a.value() + b.value());
  if (a.equals(0)) return b;
  if (b.equals(0)) return a;
  std::vector<Expr> terms;
  for (const Expr* e : {&a, &b}) {
    if (e->kind() == Expr::Kind::Add) terms.insert(terms.end(), e->operands().begin(), e->operands().end());
    else terms.push_back(*e);
  }
  // Combine like terms: key of the symbolic part -> coefficient.
  LikeTerms like;
  int64_t constant = 0;
  for (auto& t : terms) {
    auto [c, f] = split_term(t);
    if (f.empty()) { constant += c; continue; }
    std::string k = factors_key(f);
    auto it = like.find(k);
    if (it == like.end()) like.emplace(k, std::make_pair(c, f));
    else it->second.first += c;
  }
  if (auto merged = merge_division_pair(like, constant)) return *merged;
  std::vector<Expr> ops;
  for (auto& [k, cf] : like) {
    if (cf.first == 0) continue;
    Expr term = cf.second.size() == 1 ? cf.second[0] : Expr::make(Expr::Kind::Mul, cf.second);
    ops.push_back(cf.first == 1 ? term : Expr(cf.first) * term);
  }
  std::sort(ops.begin(), ops.end(), key_less);
  if (constant != 0) ops.push_back(Expr(constant));
  if (ops.empty()) return Expr(0);
  if (ops.size() == 1) return ops[0];
  return Expr::make(Expr::Kind::Add, std::move(ops));
}

Expr operator-(const Expr& a, const Expr& b) { return a + Expr(-1) * b; }

Expr Expr::floordiv(const Expr& a, const Expr& b) {
  if (b.is_const() && b.value() == 0) throw CompileError("symbolic division by zero");
  if (a.is_const() && b.is_const()) return Expr(floordiv_int(a.value(), b.value()));
  if (b.equals(1)) return a;
  if (a.equals(0)) return Expr(0);
  if (a == b) return Expr(1);
  // (k*x) // k -> x when every term of a is a multiple of b.
  if (b.is_const() || b.kind() == Kind::Sym) {
    std::vector<Expr> terms = a.kind() == Kind::Add ? a.operands() : std::vector<Expr>{a};
    Expr quotient(0);
    bool exact = true;
    for (auto& t : terms) {
      auto [c, f] = split_term(t);
      if (b.is_const()) {
        if (c % b.value() != 0) { exact = false; break; }
        quotient = quotient + Expr(c / b.value()) * product(f);
      } else {
        auto it = std::find(f.begin(), f.end(), b);
        if (it == f.end()) { exact = false; break; }
        f.erase(it);
        quotient = quotient + Expr(c) * product(f);
      }
    }
    if (exact) return quotient;
  }
  return make(Kind::FloorDiv, {a, b});
}

Expr Expr::mod(const Expr& a, const Expr& b) {
  if (a.is_const() && b.is_const()) return Expr(mod_int(a.value(), b.value()));
  if (b.equals(1) || a.equals(0) || a == b) return Expr(0);
  return make(Kind::Mod, {a, b});
}

Expr Expr::max(const Expr& a, const Expr& b) {
  if (a.is_const() && b.is_const()) return Expr(std::max(a.value(), b.value()));
  if (a == b) return a;
  return make(Kind::Max, a.key() < b.key() ? std::vector<Expr>{a, b} : std::vector<Expr>{b, a});
}

Expr Expr::min(const Expr& a, const Expr& b) {
  if (a.is_const() && b.is_const()) return Expr(std::min(a.value(), b.value()));
  if (a == b) return a;
  return make(Kind::Min, a.key() < b.key() ? std::vector<Expr>{a, b} : std::vector<Expr>{b, a});
}

Expr Expr::from_json(const Json& j) {
  if (j.is_int()) return Expr(j.as_int());
  if (j.is_string()) return symbol(j.as_string());
  if (!j.is_array() || j.size() < 2 || !j[0].is_string())
    throw UnsupportedError("unsupported symbolic expression " + j.dump());
  const std::string& op = j[0].as_string();
  std::vector<Expr> ops;
  for (size_t i = 1; i < j.size(); ++i) ops.push_back(from_json(j[i]));
  auto fold = [&](auto f) {
    Expr out = ops[0];
    for (size_t i = 1; i < ops.size(); ++i) out = f(out, ops[i]);
    return out;
  };
  if (op == "add") return fold([](const Expr& a, const Expr& b) { return a + b; });
  if (op == "mul") return fold([](const Expr& a, const Expr& b) { return a * b; });
  if (op == "floordiv" && ops.size() == 2) return floordiv(ops[0], ops[1]);
  if (op == "mod" && ops.size() == 2) return mod(ops[0], ops[1]);
  if (op == "max") return fold(Expr::max);
  if (op == "min") return fold(Expr::min);
  throw UnsupportedError("unsupported symbolic operation '" + op + "'");
}

Json Expr::to_json() const {
  switch (kind()) {
    case Kind::Const: return Json::integer(value());
    case Kind::Sym: return Json::string(name());
    default: break;
  }
  static const char* names[] = {"", "", "add", "mul", "floordiv", "mod", "max", "min"};
  Json out = Json::array({Json::string(names[static_cast<int>(kind())])});
  for (auto& o : operands()) out.push(o.to_json());
  return out;
}

std::string Expr::python() const {
  switch (kind()) {
    case Kind::Const: return key();
    case Kind::Sym: return name();
    case Kind::Add: case Kind::Mul: {
      std::string out = "(";
      for (size_t i = 0; i < operands().size(); ++i) {
        if (i) out += kind() == Kind::Add ? " + " : "*";
        out += operands()[i].python();
      }
      return out + ")";
    }
    case Kind::FloorDiv: return "(" + operands()[0].python() + " // " + operands()[1].python() + ")";
    case Kind::Mod: return "(" + operands()[0].python() + " % " + operands()[1].python() + ")";
    case Kind::Max: return "max(" + operands()[0].python() + ", " + operands()[1].python() + ")";
    case Kind::Min: return "min(" + operands()[0].python() + ", " + operands()[1].python() + ")";
  }
  return key();
}

int64_t Expr::evaluate(const std::map<std::string, int64_t>& symbols) const {
  switch (kind()) {
    case Kind::Const: return value();
    case Kind::Sym: {
      auto it = symbols.find(name());
      if (it == symbols.end()) throw CompileError("unbound symbol " + name());
      return it->second;
    }
    default: break;
  }
  std::vector<int64_t> v;
  for (auto& o : operands()) v.push_back(o.evaluate(symbols));
  switch (kind()) {
    case Kind::Add: { int64_t s = 0; for (auto x : v) s += x; return s; }
    case Kind::Mul: { int64_t s = 1; for (auto x : v) s *= x; return s; }
    case Kind::FloorDiv: return floordiv_int(v[0], v[1]);
    case Kind::Mod: return mod_int(v[0], v[1]);
    case Kind::Max: return std::max(v[0], v[1]);
    case Kind::Min: return std::min(v[0], v[1]);
    default: return 0;
  }
}

void Expr::collect_symbols(std::set<std::string>& out) const {
  if (kind() == Kind::Sym) out.insert(name());
  for (auto& o : operands()) o.collect_symbols(out);
}

Expr Expr::substitute(const std::map<std::string, Expr>& values) const {
  switch (kind()) {
    case Kind::Const: return *this;
    case Kind::Sym: {
      auto it = values.find(name());
      return it == values.end() ? *this : it->second;
    }
    default: break;
  }
  std::vector<Expr> v;
  for (auto& o : operands()) v.push_back(o.substitute(values));
  switch (kind()) {
    case Kind::Add: { Expr s(0); for (auto& x : v) s = s + x; return s; }
    case Kind::Mul: { Expr s(1); for (auto& x : v) s = s * x; return s; }
    case Kind::FloorDiv: return floordiv(v[0], v[1]);
    case Kind::Mod: return mod(v[0], v[1]);
    case Kind::Max: return max(v[0], v[1]);
    case Kind::Min: return min(v[0], v[1]);
    default: return *this;
  }
}

}  // namespace openneuron::compiler
