// The malformed-GGUF corpus as code: each case is a file's bytes, named for its defect, with a
// substring the reader's error must contain. make_gguf_malformed writes them to
// tests/data/gguf-malformed/; the test checks the committed files still match.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cohort::gguf::testing {

struct MalformedCase {
  std::string name;              // file name without ".gguf"
  std::vector<uint8_t> bytes;
  std::string expected_message;  // must appear in the Status message
};

std::vector<MalformedCase> MalformedCases();

// A small valid file (several value types, three tensors) the cases are mutations of; also a
// seed for the fuzzer.
std::vector<uint8_t> SmallValidFile();

}  // namespace cohort::gguf::testing
