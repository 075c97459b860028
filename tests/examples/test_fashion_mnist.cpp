// The IDX reader of omgs-train-torch on small files this test writes: plain and gzip'd,
// truncated, with a wrong magic number, corrupt labels, a missing directory or file.
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fashion_mnist.hpp"
#include "omgs_catch.hpp"

using omgs_examples::IdxError;
using Bytes = std::vector<std::uint8_t>;

namespace {

void put_u32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}

/// n images of 2x3 pixels, pixel j of image i = 10 i + j.
Bytes images(std::uint32_t n, std::uint32_t magic = 0x803) {
  Bytes b;
  put_u32(b, magic);
  put_u32(b, n);
  put_u32(b, 2);
  put_u32(b, 3);
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t j = 0; j < 6; ++j) b.push_back(static_cast<std::uint8_t>(10 * i + j));
  return b;
}

Bytes labels(std::uint32_t n, std::uint8_t first = 0) {
  Bytes b;
  put_u32(b, 0x801);
  put_u32(b, n);
  for (std::uint32_t i = 0; i < n; ++i) b.push_back(static_cast<std::uint8_t>((first + i) % 10));
  return b;
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/omgs_idx_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
  std::string write(const std::string& name, const Bytes& b) const {
    const std::string p = path + "/" + name;
    std::FILE* f = std::fopen(p.c_str(), "wb");
    REQUIRE(f != nullptr);
    REQUIRE(std::fwrite(b.data(), 1, b.size(), f) == b.size());
    std::fclose(f);
    return p;
  }
  std::string write_gz(const std::string& name, const Bytes& b) const {
    const std::string p = path + "/" + name;
    gzFile f = gzopen(p.c_str(), "wb");
    REQUIRE(f != nullptr);
    REQUIRE(gzwrite(f, b.data(), static_cast<unsigned>(b.size())) == static_cast<int>(b.size()));
    REQUIRE(gzclose(f) == Z_OK);
    return p;
  }
};

Bytes read_back(const std::string& path) {
  Bytes b;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  for (int c; (c = std::fgetc(f)) != EOF;) b.push_back(static_cast<std::uint8_t>(c));
  std::fclose(f);
  return b;
}

}  // namespace

TEST_CASE("IDX images and labels are read plain and gzip'd alike", "[examples][idx]") {
  TempDir d;
  for (bool gz : {false, true}) {
    const std::string ip = gz ? d.write_gz("i.gz", images(4)) : d.write("i", images(4));
    const omgs_examples::IdxImages im = omgs_examples::read_idx_images(ip);
    CHECK(im.count == 4);
    CHECK(im.rows == 2);
    CHECK(im.cols == 3);
    REQUIRE(im.pixels.size() == 24);
    CHECK(im.pixels[3 * 6 + 5] == 35);
    const std::string lp = gz ? d.write_gz("l.gz", labels(4, 7)) : d.write("l", labels(4, 7));
    CHECK(omgs_examples::read_idx_labels(lp) == Bytes{7, 8, 9, 0});
  }
}

TEST_CASE("read_split prefers the .gz file and checks the counts agree", "[examples][idx]") {
  TempDir d;
  d.write_gz("train-images-idx3-ubyte.gz", images(3));
  d.write("train-images-idx3-ubyte", images(1, 0x999));  // ignored: the .gz wins
  d.write("train-labels-idx1-ubyte", labels(3));
  const omgs_examples::Split s = omgs_examples::read_split(d.path, "train");
  CHECK(s.images.count == 3);
  CHECK(s.labels.size() == 3);
  d.write("t10k-images-idx3-ubyte", images(3));
  d.write("t10k-labels-idx1-ubyte", labels(2));
  CHECK_THROWS_WITH(omgs_examples::read_split(d.path, "t10k"),
                    Catch::Contains("has 3 images but") && Catch::Contains("2 labels"));
}

TEST_CASE("IDX errors name the file and the defect", "[examples][idx]") {
  TempDir d;
  CHECK_THROWS_WITH(omgs_examples::read_split(d.path + "/nothere", "train"),
                    Catch::Contains("data directory") && Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(omgs_examples::read_split(d.path, "train"),
                    Catch::Contains("train-images-idx3-ubyte.gz' nor"));
  CHECK_THROWS_WITH(omgs_examples::read_idx_images(d.write("magic", images(2, 0x801))),
                    Catch::Contains("wrong magic number 0x00000801"));
  CHECK_THROWS_WITH(omgs_examples::read_idx_labels(d.write("lmagic", images(2))),
                    Catch::Contains("wrong magic number 0x00000803"));
  Bytes cut = images(4);
  cut.resize(cut.size() - 5);
  CHECK_THROWS_WITH(omgs_examples::read_idx_images(d.write("cut", cut)),
                    Catch::Contains("truncated") && Catch::Contains("says 24 data bytes"));
  const Bytes one = images(1);
  CHECK_THROWS_WITH(
      omgs_examples::read_idx_images(d.write("hdr", Bytes(one.begin(), one.begin() + 9))),
      Catch::Contains("truncated inside its header"));
  CHECK_THROWS_WITH(omgs_examples::read_idx_images(d.write("tiny", Bytes{0, 0})),
                    Catch::Contains("not even the magic number"));
  Bytes extra = images(2);
  extra.push_back(1);
  CHECK_THROWS_WITH(omgs_examples::read_idx_images(d.write("extra", extra)),
                    Catch::Contains("corrupt"));
  Bytes bad_label = labels(3);
  bad_label.back() = 10;
  CHECK_THROWS_WITH(omgs_examples::read_idx_labels(d.write("badlabel", bad_label)),
                    Catch::Contains("label 2 is 10, not in [0, 10)"));
  CHECK_THROWS_WITH(omgs_examples::read_idx_images(d.write("zero", images(0))),
                    Catch::Contains("dimension 0 is 0"));
}

TEST_CASE("a truncated or corrupt gzip stream is an error, not a short read", "[examples][idx]") {
  TempDir d;
  const Bytes gz = read_back(d.write_gz("full.gz", images(50)));
  REQUIRE(gz.size() > 30);
  const Bytes cut(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2));
  CHECK_THROWS_WITH(omgs_examples::read_idx_images(d.write("cut.gz", cut)),
                    Catch::Contains("cut.gz") && Catch::Contains("zlib"));
  Bytes flipped = gz;
  for (std::size_t i = 12; i < flipped.size() - 8; ++i) flipped[i] ^= 0x5a;
  CHECK_THROWS_AS(omgs_examples::read_idx_images(d.write("flip.gz", flipped)), IdxError);
  CHECK_THROWS_WITH(omgs_examples::read_maybe_gzip(d.write_gz("big.gz", images(50)), 100),
                    Catch::Contains("more than 100 bytes"));
  CHECK_THROWS_WITH(omgs_examples::read_maybe_gzip(d.path), Catch::Contains("not a readable file"));
}
