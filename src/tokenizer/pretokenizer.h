// Pre-tokenizers for byte-level BPE: the regex cascade llama.cpp applies per
// `tokenizer.ggml.pre` (each regex splits the pieces left by the previous one), run with PCRE2.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace cohort::tokenizer {

// Everything a `tokenizer.ggml.pre` name changes in llama.cpp's BPE vocab set-up.
struct PreTokenizerSpec {
  std::vector<std::string> patterns;  // applied in order, each to every piece so far
  bool ignore_merges = false;         // a word that is itself a token is not merged
  bool clean_spaces = true;           // detokenizer's clean_up_tokenization_spaces
  bool add_bos = false;               // llama.cpp's default before add_bos_token is read
  bool bos_none = false;              // the pre-tokenizer disables the default BOS id
  // SPM-style BPE (Gemma 4): spaces become U+2581 before the split, words stay raw UTF-8
  // (no GPT-2 byte mapping), unknown bytes fall back to <0xXX>, BOS is always added.
  bool spm_style = false;
};

// The spec for a pre-tokenizer name ("" and "default" give the default set); kUnsupported for
// names llama.cpp handles with hand-written code this build does not have.
Result<PreTokenizerSpec> LookupPreTokenizer(std::string_view name);

// A compiled regex cascade. Thread-safe for concurrent Split() calls.
class PreTokenizer {
 public:
  static Result<PreTokenizer> Compile(const std::vector<std::string>& patterns);

  // Splits text into words. Invalid UTF-8 bytes become U+FFFD in the words, as in llama.cpp.
  std::vector<std::string> Split(std::string_view text) const;

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

 private:
  struct Compiled;
  PreTokenizer() = default;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace cohort::tokenizer
