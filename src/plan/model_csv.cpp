#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <string>
#include <unordered_map>

#include <omgs/plan.hpp>

namespace omgs {

namespace {

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return fields;
}

[[noreturn]] void fail(const std::string& source, std::size_t line, const std::string& what) {
  throw Error(source + ":" + std::to_string(line) + ": " + what);
}

std::uint64_t parse_numel(const std::string& text, const std::string& source, std::size_t line) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    fail(source, line, "field 'numel': '" + text + "' is not a non-negative integer");
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno == ERANGE || v > max_total_numel)
    fail(source, line,
         "field 'numel': " + text +
             " is too large (at most 2^53 = " + std::to_string(max_total_numel) + ")");
  if (v == 0) fail(source, line, "field 'numel': 0 (a tensor must have at least one element)");
  return v;
}

double parse_seconds(const std::string& text, const std::string& source, std::size_t line) {
  errno = 0;
  char* end = nullptr;
  const double v = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
  // ERANGE with a finite result is an underflow to a tiny (subnormal or zero) time: fine.
  if (text.empty() || end != text.c_str() + text.size() ||
      (errno == ERANGE && !(std::fabs(v) < 1.0)))
    fail(source, line, "field 'backward_s': '" + text + "' is not a number");
  if (!std::isfinite(v)) fail(source, line, "field 'backward_s': '" + text + "' is not finite");
  if (v < 0.0) fail(source, line, "field 'backward_s': " + text + " is negative");
  return v;
}

}  // namespace

std::vector<LayerSpec> parse_model_csv(std::istream& in, const std::string& source) {
  std::vector<LayerSpec> layers;
  std::unordered_map<std::string, std::size_t> line_of_name;
  std::string raw;
  std::size_t line = 0;
  bool header_seen = false;
  double backward_sum = 0.0;
  while (std::getline(in, raw)) {
    ++line;
    // A UTF-8 byte order mark (spreadsheet exports) is not part of the header.
    if (line == 1 && raw.compare(0, 3, "\xEF\xBB\xBF") == 0) raw.erase(0, 3);
    const std::string text = trim(raw);
    if (text.empty() || text[0] == '#') continue;
    const std::vector<std::string> fields = split_commas(text);
    if (!header_seen) {
      if (fields.size() != 3 || fields[0] != "name" || fields[1] != "numel" ||
          fields[2] != "backward_s")
        fail(source, line, "the header must be 'name,numel,backward_s', not '" + text + "'");
      header_seen = true;
      continue;
    }
    if (fields.size() != 3)
      fail(source, line,
           "expected 3 fields (name,numel,backward_s), found " + std::to_string(fields.size()));
    LayerSpec spec;
    spec.name = fields[0];
    if (spec.name.empty()) fail(source, line, "field 'name' is empty");
    if (spec.name.size() > max_layer_name_bytes)
      fail(source, line,
           "field 'name' is longer than " + std::to_string(max_layer_name_bytes) + " bytes");
    spec.numel = parse_numel(fields[1], source, line);
    spec.backward_s = parse_seconds(fields[2], source, line);
    if (!std::isfinite(backward_sum + spec.backward_s))
      fail(source, line,
           "field 'backward_s': " + fields[2] +
               " makes the sum of the backward times overflow (the total must be finite)");
    backward_sum += spec.backward_s;
    auto [it, inserted] = line_of_name.emplace(spec.name, line);
    if (!inserted)
      fail(source, line,
           "field 'name': '" + spec.name + "' already appears on line " +
               std::to_string(it->second));
    layers.push_back(std::move(spec));
  }
  if (in.bad()) throw Error(source + ": read error");
  if (!header_seen)
    throw Error(source + ": empty file (expected the header 'name,numel,backward_s')");
  if (layers.empty()) throw Error(source + ": no layers after the header");
  validate_layers(layers);
  return layers;
}

void save_model_csv(const std::string& path, const std::vector<LayerSpec>& layers) {
  validate_layers(layers);
  std::string text = "name,numel,backward_s\n";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string& n = layers[i].name;
    if (n.find_first_of(",\r\n") != std::string::npos || n[0] == '#' || trim(n) != n)
      throw Error("omgs: save_model_csv: layer " + std::to_string(i) + " '" + n +
                  "' has a name the CSV format cannot hold (comma, line break, leading '#' or "
                  "surrounding blanks)");
    char num[64];
    std::snprintf(num, sizeof num, ",%llu,%.17g\n",
                  static_cast<unsigned long long>(layers[i].numel), layers[i].backward_s);
    text += n + num;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw Error("omgs: save_model_csv: cannot write '" + path + "'");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok)
    throw Error("omgs: save_model_csv: writing '" + path + "' failed");
}

std::vector<LayerSpec> load_model_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("omgs: cannot open the model file '" + path + "'");
  return parse_model_csv(in, path);
}

}  // namespace omgs
