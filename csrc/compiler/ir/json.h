// A small JSON value with a parser and a writer: the format in which the
// Python front end hands an FX graph to the compiler and receives the plan.
// Floats keep their lexical kind ("1" is an int, "1.0" a float) because an
// ATen scalar argument's type decides type promotion.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace openneuron::compiler {

class Json {
 public:
  enum class Kind { Null, Bool, Int, Float, String, Array, Object };

  Json() = default;
  static Json boolean(bool v);
  static Json integer(int64_t v);
  static Json number(double v);
  static Json string(std::string v);
  static Json array(std::vector<Json> items = {});
  static Json object();

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }
  bool is_bool() const { return kind_ == Kind::Bool; }

  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;  // ints convert
  const std::string& as_string() const;
  const std::vector<Json>& items() const;
  std::vector<Json>& items();
  size_t size() const { return items().size(); }
  const Json& operator[](size_t i) const { return items().at(i); }

  bool has(const std::string& key) const;
  const Json& at(const std::string& key) const;  // throws if missing
  // Returns a null value when missing.
  const Json& get(const std::string& key) const;
  Json& set(const std::string& key, Json value);
  void push(Json value) { items().push_back(std::move(value)); }
  const std::vector<std::pair<std::string, Json>>& members() const;

  std::string dump() const;
  static Json parse(std::string_view text);  // throws CompileError

 private:
  void dump_to(std::string& out) const;
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string string_;
  std::vector<Json> items_;
  std::vector<std::pair<std::string, Json>> members_;
};

}  // namespace openneuron::compiler
