#include "fashion_mnist.hpp"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace omgs_examples {

namespace {

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::uint32_t big_endian_u32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

/// prefix-kind-idxN-ubyte, gzip'd if that exists.
std::string find_idx(const std::string& dir, const std::string& name) {
  const std::string plain = dir + "/" + name;
  if (is_file(plain + ".gz")) return plain + ".gz";
  if (is_file(plain)) return plain;
  throw IdxError("fashion-mnist: neither '" + plain + ".gz' nor '" + plain + "' exists");
}

}  // namespace

std::vector<std::uint8_t> read_maybe_gzip(const std::string& path, std::size_t max_bytes) {
  if (!is_file(path)) throw IdxError("fashion-mnist: '" + path + "' is not a readable file");
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) throw IdxError("fashion-mnist: cannot open '" + path + "': " + std::strerror(errno));
  std::vector<std::uint8_t> out;
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const int n = gzread(f.get(), chunk, sizeof chunk);
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f.get(), &code);
      throw IdxError("fashion-mnist: '" + path + "' is corrupt (zlib: " + msg + ")");
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes)
      throw IdxError("fashion-mnist: '" + path + "' holds more than " + std::to_string(max_bytes) +
                     " bytes");
    out.insert(out.end(), chunk, chunk + n);
  }
  // A gzip stream cut short ends in a read of 0 bytes with Z_BUF_ERROR set.
  int code = Z_OK;
  const char* msg = gzerror(f.get(), &code);
  if (code != Z_OK)
    throw IdxError("fashion-mnist: '" + path + "' is truncated or corrupt (zlib: " + msg + ")");
  return out;
}

std::vector<std::uint8_t> parse_idx(const std::vector<std::uint8_t>& content, int dims,
                                    const std::string& what, std::vector<std::size_t>& shape) {
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(dims);
  if (content.size() < 4)
    throw IdxError("fashion-mnist: '" + what + "' is truncated: " + std::to_string(content.size()) +
                   " bytes, not even the magic number");
  const std::uint32_t magic = big_endian_u32(content.data());
  const std::uint32_t want = 0x800u + static_cast<std::uint32_t>(dims);
  if (magic != want) {
    char text[96];
    std::snprintf(text, sizeof text,
                  "wrong magic number 0x%08x (an IDX file of %d-D bytes has 0x%08x)", magic, dims,
                  want);
    throw IdxError("fashion-mnist: '" + what + "': " + text);
  }
  if (content.size() < header)
    throw IdxError("fashion-mnist: '" + what + "' is truncated inside its header");
  shape.clear();
  std::size_t total = 1;
  for (int d = 0; d < dims; ++d) {
    const std::uint32_t n = big_endian_u32(content.data() + 4 + 4 * d);
    if (n == 0 || n > (1u << 26))
      throw IdxError("fashion-mnist: '" + what + "': dimension " + std::to_string(d) + " is " +
                     std::to_string(n) + ", not in [1, 2^26]");
    shape.push_back(n);
    total *= n;
    if (total > (std::size_t{1} << 32))
      throw IdxError("fashion-mnist: '" + what + "': more than 2^32 entries");
  }
  const std::size_t have = content.size() - header;
  if (have != total)
    throw IdxError("fashion-mnist: '" + what + "' is " +
                   std::string(have < total ? "truncated" : "corrupt") + ": its header says " +
                   std::to_string(total) + " data bytes, it holds " + std::to_string(have));
  return std::vector<std::uint8_t>(content.begin() + static_cast<std::ptrdiff_t>(header),
                                   content.end());
}

IdxImages read_idx_images(const std::string& path) {
  std::vector<std::size_t> shape;
  IdxImages im;
  im.pixels = parse_idx(read_maybe_gzip(path), 3, path, shape);
  im.count = shape[0];
  im.rows = shape[1];
  im.cols = shape[2];
  return im;
}

std::vector<std::uint8_t> read_idx_labels(const std::string& path, int classes) {
  std::vector<std::size_t> shape;
  std::vector<std::uint8_t> labels = parse_idx(read_maybe_gzip(path), 1, path, shape);
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] >= classes)
      throw IdxError("fashion-mnist: '" + path + "' is corrupt: label " + std::to_string(i) +
                     " is " + std::to_string(labels[i]) + ", not in [0, " +
                     std::to_string(classes) + ")");
  return labels;
}

Split read_split(const std::string& dir, const std::string& prefix) {
  if (!is_directory(dir))
    throw IdxError("fashion-mnist: the data directory '" + dir +
                   "' does not exist (Debian: apt-get install dataset-fashion-mnist; or pass "
                   "--data-dir)");
  Split s;
  const std::string images = find_idx(dir, prefix + "-images-idx3-ubyte");
  const std::string labels = find_idx(dir, prefix + "-labels-idx1-ubyte");
  s.images = read_idx_images(images);
  s.labels = read_idx_labels(labels);
  if (s.labels.size() != s.images.count)
    throw IdxError("fashion-mnist: '" + images + "' has " + std::to_string(s.images.count) +
                   " images but '" + labels + "' " + std::to_string(s.labels.size()) + " labels");
  return s;
}

}  // namespace omgs_examples
