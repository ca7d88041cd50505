// Writes the malformed-GGUF corpus (malformed_cases.cc) into a directory, one file per case:
//   make_gguf_malformed tests/data/gguf-malformed
#include <cstdio>
#include <fstream>
#include <string>

#include "malformed_cases.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  int n = 0;
  for (const auto& c : cohort::gguf::testing::MalformedCases()) {
    const std::string path = std::string(argv[1]) + "/" + c.name + ".gguf";
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(c.bytes.data()),
              static_cast<std::streamsize>(c.bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
    ++n;
  }
  std::printf("wrote %d files to %s\n", n, argv[1]);
  return 0;
}
