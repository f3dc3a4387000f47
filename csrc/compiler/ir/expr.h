// Symbolic integer expressions: tensor sizes, strides and offsets that may
// depend on symbols (dynamic shapes). Kernels receive symbol values as
// arguments, so one kernel serves every size. Expressions are immutable and
// kept in a canonical form so equal expressions print equally.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace openneuron::compiler {

class Json;

class Expr {
 public:
  enum class Kind { Const, Sym, Add, Mul, FloorDiv, Mod, Max, Min };

  Expr() : Expr(int64_t{0}) {}
  Expr(int64_t value);  // NOLINT: constants convert implicitly
  static Expr symbol(const std::string& name);
  // From the front end's prefix form: 5, "s0", ["add", a, b, ...], ["mul", ...],
  // ["floordiv", a, b], ["mod", a, b], ["max", a, b], ["min", a, b].
  static Expr from_json(const Json& j);
  Json to_json() const;

  Kind kind() const;
  bool is_const() const { return kind() == Kind::Const; }
  int64_t value() const;  // for constants
  const std::string& name() const;  // for symbols
  const std::vector<Expr>& operands() const;

  friend Expr operator+(const Expr& a, const Expr& b);
  friend Expr operator-(const Expr& a, const Expr& b);
  friend Expr operator*(const Expr& a, const Expr& b);
  static Expr floordiv(const Expr& a, const Expr& b);
  static Expr mod(const Expr& a, const Expr& b);
  static Expr max(const Expr& a, const Expr& b);
  static Expr min(const Expr& a, const Expr& b);

  bool operator==(const Expr& other) const { return key() == other.key(); }
  bool operator!=(const Expr& other) const { return !(*this == other); }
  bool equals(int64_t v) const { return is_const() && value() == v; }

  // Canonical text. The C++ target uses it as an expression as is (its
  // prelude defines on_floordiv and on_mod; symbols are int64_t).
  const std::string& key() const;
  // Python syntax, for the generated wrapper.
  std::string python() const;
  int64_t evaluate(const std::map<std::string, int64_t>& symbols) const;
  void collect_symbols(std::set<std::string>& out) const;
  // Replaces symbols by expressions.
  Expr substitute(const std::map<std::string, Expr>& values) const;

 private:
  struct Node;
  explicit Expr(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  static Expr make(Kind kind, std::vector<Expr> operands);
  std::shared_ptr<const Node> node_;
};

Expr product(const std::vector<Expr>& values);
std::vector<Expr> contiguous_strides(const std::vector<Expr>& shape);
std::string join_keys(const std::vector<Expr>& values);

}  // namespace openneuron::compiler
