#include "compiler/ir/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "compiler/ir/errors.h"

namespace openneuron::compiler {

Json Json::boolean(bool v) { Json j; j.kind_ = Kind::Bool; j.bool_ = v; return j; }
Json Json::integer(int64_t v) { Json j; j.kind_ = Kind::Int; j.int_ = v; return j; }
Json Json::number(double v) { Json j; j.kind_ = Kind::Float; j.float_ = v; return j; }
Json Json::string(std::string v) {
  Json j; j.kind_ = Kind::String; j.string_ = std::move(v); return j;
}
Json Json::array(std::vector<Json> items) {
  Json j; j.kind_ = Kind::Array; j.items_ = std::move(items); return j;
}
Json Json::object() { Json j; j.kind_ = Kind::Object; return j; }

static void expect(bool ok, const char* what) {
  if (!ok) throw CompileError(std::string("graph JSON: ") + what);
}

bool Json::as_bool() const { expect(kind_ == Kind::Bool, "expected a bool"); return bool_; }
int64_t Json::as_int() const {
  if (kind_ == Kind::Bool) return bool_;
  expect(kind_ == Kind::Int, "expected an int");
  return int_;
}
double Json::as_double() const {
  if (kind_ == Kind::Int) return static_cast<double>(int_);
  if (kind_ == Kind::Bool) return bool_;
  expect(kind_ == Kind::Float, "expected a number");
  return float_;
}
const std::string& Json::as_string() const {
  expect(kind_ == Kind::String, "expected a string");
  return string_;
}
const std::vector<Json>& Json::items() const {
  expect(kind_ == Kind::Array, "expected an array");
  return items_;
}
std::vector<Json>& Json::items() {
  expect(kind_ == Kind::Array, "expected an array");
  return items_;
}
const std::vector<std::pair<std::string, Json>>& Json::members() const {
  expect(kind_ == Kind::Object, "expected an object");
  return members_;
}
bool Json::has(const std::string& key) const {
  if (kind_ != Kind::Object) return false;
  for (auto& [k, v] : members_) if (k == key) return true;
  return false;
}
const Json& Json::get(const std::string& key) const {
  static const Json null_value;
  if (kind_ != Kind::Object) return null_value;
  for (auto& [k, v] : members_) if (k == key) return v;
  return null_value;
}
const Json& Json::at(const std::string& key) const {
  expect(kind_ == Kind::Object, "expected an object");
  for (auto& [k, v] : members_) if (k == key) return v;
  throw CompileError("graph JSON: missing key '" + key + "'");
}
Json& Json::set(const std::string& key, Json value) {
  expect(kind_ == Kind::Object, "expected an object");
  for (auto& [k, v] : members_)
    if (k == key) { v = std::move(value); return v; }
  members_.emplace_back(key, std::move(value));
  return members_.back().second;
}

static void dump_string(const std::string& s, std::string& out) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void Json::dump_to(std::string& out) const {
  switch (kind_) {
    case Kind::Null: out += "null"; break;
    case Kind::Bool: out += bool_ ? "true" : "false"; break;
    case Kind::Int: out += std::to_string(int_); break;
    case Kind::Float: {
      if (std::isnan(float_)) { out += "NaN"; break; }
      if (std::isinf(float_)) { out += float_ > 0 ? "Infinity" : "-Infinity"; break; }
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", float_);
      std::string s = buf;
      if (s.find_first_of(".eE") == std::string::npos) s += ".0";
      out += s;
      break;
    }
    case Kind::String: dump_string(string_, out); break;
    case Kind::Array:
      out += '[';
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i) out += ',';
        items_[i].dump_to(out);
      }
      out += ']';
      break;
    case Kind::Object:
      out += '{';
      for (size_t i = 0; i < members_.size(); ++i) {
        if (i) out += ',';
        dump_string(members_[i].first, out);
        out += ':';
        members_[i].second.dump_to(out);
      }
      out += '}';
      break;
  }
}

std::string Json::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Json parse_document() {
    Json value = parse_value();
    skip_space();
    if (pos_ != text_.size()) fail("trailing characters");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw CompileError("graph JSON: " + what + " at offset " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) == word) { pos_ += word.size(); return true; }
    return false;
  }
  Json parse_value() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    char c = text_[pos_];
    if (c == '{') return parse_object();
    if (c == '[') return parse_array();
    if (c == '"') return Json::string(parse_string());
    if (consume("null")) return Json();
    if (consume("true")) return Json::boolean(true);
    if (consume("false")) return Json::boolean(false);
    if (consume("NaN")) return Json::number(NAN);
    if (consume("Infinity")) return Json::number(INFINITY);
    if (consume("-Infinity")) return Json::number(-INFINITY);
    return parse_number();
  }
  Json parse_number() {
    size_t start = pos_;
    bool is_float = false;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '.' || c == 'e' || c == 'E') is_float = true;
      else if (!(c == '-' || c == '+' || (c >= '0' && c <= '9'))) break;
      ++pos_;
    }
    if (pos_ == start) fail("unexpected character");
    std::string token(text_.substr(start, pos_ - start));
    if (is_float) return Json::number(std::strtod(token.c_str(), nullptr));
    return Json::integer(std::strtoll(token.c_str(), nullptr, 10));
  }
  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c != '\\') { out += c; continue; }
      if (pos_ >= text_.size()) fail("bad escape");
      char e = text_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (pos_ + 4 > text_.size()) fail("bad \\u escape");
          unsigned code = std::stoul(std::string(text_.substr(pos_, 4)), nullptr, 16);
          pos_ += 4;
          if (code < 0x80) out += static_cast<char>(code);
          else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default: out += e;
      }
    }
    if (pos_ >= text_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }
  Json parse_array() {
    ++pos_;
    Json out = Json::array();
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == ']') { ++pos_; return out; }
    while (true) {
      out.push(parse_value());
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') { ++pos_; continue; }
      if (pos_ < text_.size() && text_[pos_] == ']') { ++pos_; return out; }
      fail("expected ',' or ']'");
    }
  }
  Json parse_object() {
    ++pos_;
    Json out = Json::object();
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '}') { ++pos_; return out; }
    while (true) {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a key");
      std::string key = parse_string();
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != ':') fail("expected ':'");
      ++pos_;
      out.set(key, parse_value());
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') { ++pos_; continue; }
      if (pos_ < text_.size() && text_[pos_] == '}') { ++pos_; return out; }
      fail("expected ',' or '}'");
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

Json Json::parse(std::string_view text) { return Parser(text).parse_document(); }

}  // namespace openneuron::compiler
