// Saved gradients: every layer's gradient of a few iterations on every rank, as
// omgs-train-torch --save-gradients writes them and omgs-bench-sparse-allreduce --source
// file:PATH reads them (real gradients' skew, beside the synthetic sources). Header-only, no
// dependency (the benchmark includes it without the torch example).
//
// Layout (host byte order, little-endian where written):
//   "OMGSGRD1"                          8 bytes
//   u32 ranks, u32 iterations, u32 layers
//   per layer: u64 numel, u32 name length, the name's bytes
//   per iteration, per rank: float[sum of numel] (the layers concatenated in order)
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace omgs_examples {

struct GradientFile {
  std::uint32_t ranks = 0, iterations = 0;
  std::vector<std::string> names;
  std::vector<std::uint64_t> numel;  // per layer
  std::vector<float> data;           // [iteration][rank][total()]

  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (const std::uint64_t n : numel) t += n;
    return t;
  }
  /// Rank `rank`'s gradient of iteration `iteration`, total() floats.
  const float* record(std::uint32_t iteration, std::uint32_t rank) const {
    return data.data() + (static_cast<std::uint64_t>(iteration) * ranks + rank) * total();
  }
};

namespace detail_gradient_file {

constexpr char kMagic[8] = {'O', 'M', 'G', 'S', 'G', 'R', 'D', '1'};

struct Closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, Closer>;

inline void put(std::FILE* f, const void* p, std::size_t bytes, const std::string& path) {
  if (bytes > 0 && std::fwrite(p, 1, bytes, f) != bytes)
    throw std::runtime_error("gradient file '" + path + "': write failed");
}

inline void get(std::FILE* f, void* p, std::size_t bytes, const std::string& path,
                const char* what) {
  if (bytes > 0 && std::fread(p, 1, bytes, f) != bytes)
    throw std::runtime_error("gradient file '" + path + "': truncated in " + what);
}

}  // namespace detail_gradient_file

/// Writes `g`; std::runtime_error naming the path if it cannot, or if g.data does not hold
/// iterations x ranks x total() floats.
inline void write_gradient_file(const std::string& path, const GradientFile& g) {
  namespace d = detail_gradient_file;
  if (g.names.size() != g.numel.size() ||
      g.data.size() != static_cast<std::uint64_t>(g.iterations) * g.ranks * g.total())
    throw std::runtime_error("gradient file '" + path + "': inconsistent contents");
  d::File f(std::fopen(path.c_str(), "wb"));
  if (!f) throw std::runtime_error("gradient file '" + path + "': cannot open for writing");
  const auto layers = static_cast<std::uint32_t>(g.numel.size());
  d::put(f.get(), d::kMagic, sizeof d::kMagic, path);
  for (const std::uint32_t v : {g.ranks, g.iterations, layers}) d::put(f.get(), &v, 4, path);
  for (std::size_t l = 0; l < g.numel.size(); ++l) {
    const auto len = static_cast<std::uint32_t>(g.names[l].size());
    d::put(f.get(), &g.numel[l], 8, path);
    d::put(f.get(), &len, 4, path);
    d::put(f.get(), g.names[l].data(), len, path);
  }
  d::put(f.get(), g.data.data(), g.data.size() * sizeof(float), path);
  if (std::fflush(f.get()) != 0)
    throw std::runtime_error("gradient file '" + path + "': write failed");
}

/// Reads a file write_gradient_file wrote; std::runtime_error naming the path and what is
/// wrong (missing, not such a file, truncated, empty, trailing bytes).
inline GradientFile read_gradient_file(const std::string& path) {
  namespace d = detail_gradient_file;
  d::File f(std::fopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error("gradient file '" + path + "': cannot open");
  char magic[8] = {};
  d::get(f.get(), magic, sizeof magic, path, "the header");
  if (std::memcmp(magic, d::kMagic, sizeof magic) != 0)
    throw std::runtime_error("gradient file '" + path + "': not a gradient file (no OMGSGRD1)");
  GradientFile g;
  std::uint32_t layers = 0;
  d::get(f.get(), &g.ranks, 4, path, "the header");
  d::get(f.get(), &g.iterations, 4, path, "the header");
  d::get(f.get(), &layers, 4, path, "the header");
  if (g.ranks == 0 || g.iterations == 0 || layers == 0 || layers > (1u << 20))
    throw std::runtime_error("gradient file '" + path + "': no gradients (ranks " +
                             std::to_string(g.ranks) + ", iterations " +
                             std::to_string(g.iterations) + ", layers " + std::to_string(layers) +
                             ")");
  for (std::uint32_t l = 0; l < layers; ++l) {
    std::uint64_t n = 0;
    std::uint32_t len = 0;
    d::get(f.get(), &n, 8, path, "the layers");
    d::get(f.get(), &len, 4, path, "the layers");
    if (len > 4096 || n > (std::uint64_t{1} << 32))
      throw std::runtime_error("gradient file '" + path + "': layer " + std::to_string(l) +
                               " is not valid");
    std::string name(len, '\0');
    d::get(f.get(), name.data(), len, path, "the layers");
    g.numel.push_back(n);
    g.names.push_back(name);
  }
  const std::uint64_t floats = static_cast<std::uint64_t>(g.iterations) * g.ranks * g.total();
  if (g.total() == 0 || g.total() > (std::uint64_t{1} << 32) || floats > (std::uint64_t{1} << 34))
    throw std::runtime_error("gradient file '" + path + "': " + std::to_string(g.total()) +
                             " elements per gradient is out of range");
  g.data.resize(static_cast<std::size_t>(floats));
  d::get(f.get(), g.data.data(), g.data.size() * sizeof(float), path, "the gradients");
  char extra = 0;
  if (std::fread(&extra, 1, 1, f.get()) != 0)
    throw std::runtime_error("gradient file '" + path + "': bytes after the gradients");
  return g;
}

}  // namespace omgs_examples
