// The saved-gradient file of omgs-train-torch --save-gradients and omgs-bench-sparse-allreduce
// --source file:PATH (examples/gradient_file.hpp): written and read back bit for bit; a
// missing file, a wrong magic, a truncated file, trailing bytes and inconsistent contents are
// errors naming the path.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "gradient_file.hpp"
#include "omgs_catch.hpp"

using omgs_examples::GradientFile;
using omgs_examples::read_gradient_file;
using omgs_examples::write_gradient_file;

namespace {

struct TempFile {
  std::string path;
  TempFile() {
    char tmpl[] = "/tmp/omgs_grad_XXXXXX";
    const int fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    close(fd);
    path = tmpl;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

GradientFile sample() {
  GradientFile g;
  g.ranks = 3;
  g.iterations = 2;
  g.names = {"conv1.weight", "conv1.bias", "fc.weight"};
  g.numel = {6, 2, 5};
  for (std::uint64_t i = 0; i < 2 * 3 * 13; ++i) g.data.push_back(0.25f * float(i) - 7.0f);
  return g;
}

/// Keeps the file's first `keep` bytes and appends `append`.
void rewrite(const std::string& path, std::size_t keep, const std::string& append = "") {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::vector<char> bytes(1 << 16);
  bytes.resize(std::fread(bytes.data(), 1, bytes.size(), f));
  std::fclose(f);
  bytes.resize(std::min(keep, bytes.size()));
  bytes.insert(bytes.end(), append.begin(), append.end());
  f = std::fopen(path.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

}  // namespace

TEST_CASE("a gradient file reads back what was written") {
  TempFile t;
  const GradientFile g = sample();
  write_gradient_file(t.path, g);
  const GradientFile r = read_gradient_file(t.path);
  CHECK(r.ranks == 3);
  CHECK(r.iterations == 2);
  CHECK(r.names == g.names);
  CHECK(r.numel == g.numel);
  CHECK(r.total() == 13);
  CHECK(r.data == g.data);
  // Iteration 1, rank 2: the last record.
  CHECK(r.record(1, 2) == r.data.data() + (1 * 3 + 2) * 13);
  CHECK(*r.record(1, 2) == g.data[(1 * 3 + 2) * 13]);
}

TEST_CASE("a bad gradient file is an error naming the path") {
  TempFile t;
  CHECK_THROWS_WITH(read_gradient_file(t.path + ".missing"), Catch::Contains("cannot open"));
  GradientFile g = sample();
  g.data.pop_back();
  CHECK_THROWS_WITH(write_gradient_file(t.path, g), Catch::Contains("inconsistent contents"));
  CHECK_THROWS_WITH(write_gradient_file("/nonexistent-dir/x", sample()),
                    Catch::Contains("cannot open for writing"));
  write_gradient_file(t.path, sample());
  rewrite(t.path, 100000, "x");
  CHECK_THROWS_WITH(read_gradient_file(t.path), Catch::Contains("bytes after the gradients"));
  write_gradient_file(t.path, sample());
  rewrite(t.path, 60);
  CHECK_THROWS_WITH(read_gradient_file(t.path), Catch::Contains("truncated in"));
  rewrite(t.path, 0, "OMGSGRD2");
  CHECK_THROWS_WITH(read_gradient_file(t.path), Catch::Contains("not a gradient file"));
  rewrite(t.path, 0, std::string("OMGSGRD1") + std::string(12, '\0'));
  CHECK_THROWS_WITH(read_gradient_file(t.path), Catch::Contains("no gradients"));
  CHECK_THROWS_WITH(read_gradient_file(t.path), Catch::Contains(t.path));
}
