// Corpus replay without libFuzzer: runs LLVMFuzzerTestOneInput once on every file of the
// directories (or files) given as arguments, in name order, so that the committed corpus
// runs in the normal test suite with any compiler. A violated invariant aborts, failing
// the test; a missing or empty corpus fails it too.
//
//   omgs_fuzz_replay_<target> DIR_OR_FILE...
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace fs = std::filesystem;

namespace {

bool run_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.string().c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.string().c_str(), bytes.size());
  // A copy of exactly the input's size, so that the sanitizers see reads past its end.
  std::vector<std::uint8_t> data(bytes.begin(), bytes.end());
  static const std::uint8_t none = 0;  // libFuzzer never passes a null pointer either
  LLVMFuzzerTestOneInput(data.empty() ? &none : data.data(), data.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  std::size_t inputs = 0;
  for (int a = 1; a < argc; ++a) {
    const fs::path arg(argv[a]);
    std::error_code ec;
    std::vector<fs::path> files;
    if (fs::is_directory(arg, ec)) {
      for (const fs::directory_entry& e : fs::directory_iterator(arg, ec))
        if (e.is_regular_file(ec)) files.push_back(e.path());
      if (ec) {
        std::fprintf(stderr, "replay: cannot list %s: %s\n", argv[a], ec.message().c_str());
        return 1;
      }
      std::sort(files.begin(), files.end());
    } else if (fs::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a directory\n", argv[a]);
      return 1;
    }
    for (const fs::path& f : files) {
      if (!run_file(f)) return 1;
      ++inputs;
    }
  }
  if (inputs == 0) {
    std::fprintf(stderr, "replay: no inputs found\n");
    return 1;
  }
  std::fprintf(stderr, "replay: %zu inputs, no invariant violated\n", inputs);
  return 0;
}
