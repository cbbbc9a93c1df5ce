// Without libFuzzer: runs every file named on the command line (a folder: every file in it, in
// name order) through the target's LLVMFuzzerTestOneInput once, so ctest replays the committed
// corpus and every crash input that was fixed. A crash is what it is under libFuzzer too: an
// escaping exception ends the process through std::terminate, a failed check traps.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      std::vector<fs::path> in_dir;
      for (const auto& e : fs::directory_iterator(argv[i]))
        if (e.is_regular_file()) in_dir.push_back(e.path());
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else {
      files.emplace_back(argv[i]);
    }
  }
  // An empty corpus would make the test pass while testing nothing.
  if (files.empty()) {
    std::fprintf(stderr, "%s: no input files (usage: %s CORPUS_DIR_OR_FILE...)\n", argv[0], argv[0]);
    return 1;
  }
  for (const fs::path& p : files) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], p.c_str());
      return 1;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay %s (%zu bytes)\n", p.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%zu inputs replayed without a crash\n", files.size());
  return 0;
}
