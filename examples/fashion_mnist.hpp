// Reading the (Fashion-)MNIST IDX files: train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each gzip'd (".gz") or not. Every defect
// (missing directory or file, wrong magic number, odd dimensions, a truncated or corrupt
// file, labels out of range, image and label counts that differ) is an IdxError naming the
// file and what is wrong; nothing here crashes or reads out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace omgs_examples {

struct IdxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// count images of rows x cols bytes each, row-major, one after the other.
struct IdxImages {
  std::size_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;
};

/// The whole content of path, decompressed when it is gzip'd (zlib reads plain files as
/// they are). Throws IdxError on a missing file, a truncated or corrupt gzip stream, or
/// more than max_bytes of content.
std::vector<std::uint8_t> read_maybe_gzip(const std::string& path,
                                          std::size_t max_bytes = std::size_t{1} << 30);

/// An IDX file of unsigned bytes with `dims` dimensions (magic 0x0000080<dims>), parsed from
/// its content; `what` names it in errors. The dimensions go to `shape`.
std::vector<std::uint8_t> parse_idx(const std::vector<std::uint8_t>& content, int dims,
                                    const std::string& what, std::vector<std::size_t>& shape);

IdxImages read_idx_images(const std::string& path);
/// Labels, each checked to be < classes.
std::vector<std::uint8_t> read_idx_labels(const std::string& path, int classes = 10);

/// One split (train or test): images and their labels, the same count.
struct Split {
  IdxImages images;
  std::vector<std::uint8_t> labels;
};

/// `prefix` "train" or "t10k" under dir: prefix-images-idx3-ubyte[.gz] and
/// prefix-labels-idx1-ubyte[.gz] (the .gz file is preferred when both exist).
Split read_split(const std::string& dir, const std::string& prefix);

}  // namespace omgs_examples
