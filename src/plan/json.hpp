// A small JSON reader and writer helpers for omgs' own files (perf models, plans, traces).
// Not a general-purpose library: numbers are doubles, objects keep insertion order.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <omgs/export.hpp>

namespace omgs::detail {

class OMGS_EXPORT JsonValue {
 public:
  enum class Kind { null, boolean, number, string, array, object };

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  double number() const { return number_; }
  bool boolean() const { return boolean_; }
  const std::string& string() const { return string_; }
  const std::vector<JsonValue>& array() const { return array_; }
  const std::vector<std::pair<std::string, JsonValue>>& object() const { return object_; }
  /// The member named key, or nullptr.
  const JsonValue* find(std::string_view key) const;
  /// The line of the document on which the value starts (1-based; 0 if not parsed).
  std::size_t line() const { return line_; }
  void set_line(std::size_t line) { line_ = line; }

  static JsonValue make_null() { return JsonValue(Kind::null); }
  static JsonValue make_bool(bool b);
  static JsonValue make_number(double d);
  static JsonValue make_string(std::string s);
  static JsonValue make_array(std::vector<JsonValue> a);
  static JsonValue make_object(std::vector<std::pair<std::string, JsonValue>> o);

 private:
  explicit JsonValue(Kind k) : kind_(k) {}
  Kind kind_ = Kind::null;
  std::size_t line_ = 0;
  bool boolean_ = false;
  double number_ = 0.0;
  std::string string_;
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> object_;
};

/// Parses a whole document; throws omgs::Error "<source>: line L, column C: ..." on error.
OMGS_EXPORT JsonValue parse_json(std::string_view text, const std::string& source);

/// Kind name for messages ("number", "object", ...).
OMGS_EXPORT const char* json_kind_name(JsonValue::Kind kind);

/// Writes s as a JSON string literal (with quotes).
OMGS_EXPORT std::string json_quote(std::string_view s);
/// Writes d so that it reads back as the same double (17 significant digits, no locale).
OMGS_EXPORT std::string json_number(double d);

}  // namespace omgs::detail
