// The main() of a fuzzer's replay test: runs LLVMFuzzerTestOneInput once on
// every file under the directories (or files) named on the command line, so
// each fuzzer's seed corpus is a regression test of the ordinary build. The
// fuzzing itself links libFuzzer's main instead (tools/fuzz/run.sh).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                         bytes.size());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path root(argv[i]);
    if (std::filesystem::is_directory(root)) {
      for (const auto& entry :
           std::filesystem::recursive_directory_iterator(root)) {
        if (entry.is_regular_file()) runs += RunFile(entry.path());
      }
    } else if (std::filesystem::is_regular_file(root)) {
      runs += RunFile(root);
    } else {
      std::fprintf(stderr, "replay: no such corpus: %s\n", argv[i]);
      return 2;
    }
  }
  std::printf("replay: %d inputs ran\n", runs);
  return runs > 0 ? 0 : 1;
}
