#include <string>

#include "omgs_catch.hpp"
#include "plan/json.hpp"

#include <omgs/error.hpp>

using omgs::detail::JsonValue;
using omgs::detail::parse_json;

TEST_CASE("JSON reader parses the value kinds", "[plan][json]") {
  const JsonValue v = parse_json(
      R"( {"a": [1, -2.5e3, 0, true, false, null], "s": "x\"\\\/\n\u00e9\ud83d\ude00", "o": {}} )",
      "t");
  REQUIRE(v.is(JsonValue::Kind::object));
  const JsonValue* a = v.find("a");
  REQUIRE(a != nullptr);
  REQUIRE(a->array().size() == 6);
  CHECK(a->array()[1].number() == -2500.0);
  CHECK(a->array()[3].boolean());
  CHECK(a->array()[5].is(JsonValue::Kind::null));
  CHECK(v.find("s")->string() == "x\"\\/\n\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(v.find("o")->object().empty());
  CHECK(v.find("missing") == nullptr);
}

TEST_CASE("JSON reader rejects malformed documents with a position", "[plan][json]") {
  const char* bad[] = {"{",     "[1,]",        "{\"a\" 1}", "01",
                       "1.",    "-",           "\"abc",     "{\"a\":1,\"a\":2}",
                       "[1] x", "tru",         "\"\\q\"",   "\"\\ud800\"",
                       "1e400", "{\"a\":\n @}"};
  for (const char* text : bad) {
    INFO(text);
    CHECK_THROWS_AS(parse_json(text, "doc"), omgs::Error);
  }
  CHECK_THROWS_WITH(parse_json("{\"a\":\n @}", "doc"), Catch::Contains("doc: line 2, column 2"));
  std::string deep(100, '[');
  CHECK_THROWS_WITH(parse_json(deep, "doc"), Catch::Contains("nesting"));
}

TEST_CASE("JSON writers round-trip numbers and strings", "[plan][json]") {
  for (double d : {0.0, 1.0, -3.5, 0.1, 1e-300, 2.18896957e-10, 123456789.123456789}) {
    const JsonValue v = parse_json(omgs::detail::json_number(d), "n");
    CHECK(v.number() == d);
  }
  const std::string s = "tab\there \"quoted\" back\\slash \x01";
  CHECK(parse_json(omgs::detail::json_quote(s), "s").string() == s);
}
