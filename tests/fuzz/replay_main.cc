// The driver of the fuzz targets in a build without libFuzzer (g++): runs
// each file named on the command line through LLVMFuzzerTestOneInput once,
// as libFuzzer does given files; a directory stands for its regular files,
// in name order. So the seed corpus, and every crash found and kept in it,
// is a regression test of the normal build (fuzz_corpus_* in CTest).
//
// A target that crashes, aborts or lets an exception out fails the run. So
// does an argument that names nothing, or a run of no file at all: a corpus
// test that runs nothing would prove nothing.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

// Runs one file; false if it cannot be read.
bool run_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return false;
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
  std::fflush(stdout);  // the name shows even if the target dies
  // A buffer of exactly the input's size, as libFuzzer passes.
  auto data = std::make_unique<uint8_t[]>(bytes.size());
  std::copy(bytes.begin(), bytes.end(), data.get());
  LLVMFuzzerTestOneInput(data.get(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 2;
  }
  size_t ran = 0;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    std::vector<fs::path> files;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& entry : fs::directory_iterator(argv[i], ec)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
    } else if (fs::is_regular_file(argv[i], ec)) {
      files.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "%s: %s is neither a file nor a directory\n", argv[0], argv[i]);
      return 1;
    }
    for (const auto& f : files) {
      if (!run_file(f)) {
        std::fprintf(stderr, "%s: cannot read %s\n", argv[0], f.c_str());
        return 1;
      }
      ++ran;
    }
  }
  if (ran == 0) {
    std::fprintf(stderr, "%s: no input to run\n", argv[0]);
    return 1;
  }
  std::printf("%zu inputs ran without a crash\n", ran);
  return 0;
}
