// Tokenizer: text <-> token ids for the vocabularies GGUF files carry
// (tokenizer.ggml.model "llama" = SentencePiece-style, "gpt2" = byte-level BPE), with
// special tokens and BOS/EOS rules from the metadata, as llama.cpp applies them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace cohort::gguf {
class File;
}

namespace cohort::tokenizer {

enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Builds the tokenizer the GGUF's tokenizer.* metadata describes.
  static Result<std::unique_ptr<Tokenizer>> FromGguf(const gguf::File& file);

  // add_special: add BOS/EOS as the metadata says (add_bos_token, add_eos_token).
  // parse_special: text matching a special/control token's content becomes that token;
  // otherwise it is tokenized as plain text (llama.cpp's `parse_special`).
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;

  // The bytes one token stands for. Control tokens give "" unless `render_special`.
  virtual std::string TokenToPiece(int32_t id, bool render_special) const = 0;
  // The text of a sequence (SPM: the leading space of the first piece is kept as llama.cpp's
  // detokenizer does with its default flags).
  virtual std::string Decode(std::span<const int32_t> ids, bool render_special) const = 0;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos() const = 0;  // -1 when absent
  virtual int32_t eos() const = 0;  // -1 when absent
  virtual bool add_bos() const = 0;
  virtual bool add_eos() const = 0;
  // End-of-generation: eos, eot, eom and similar tokens named in the metadata.
  virtual bool IsEndOfGeneration(int32_t id) const = 0;
  virtual TokenType type(int32_t id) const = 0;
  // The stored text of token id (for chat templates and inspection), unchecked bytes.
  virtual const std::string& text(int32_t id) const = 0;
};

// Turns a stream of token ids into text that never ends inside a UTF-8 character: bytes of
// an incomplete character are held back until the character is complete.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(tokenizer), render_special_(render_special) {}
  // Text that became complete with this token (possibly empty).
  std::string Push(int32_t id);
  // Whatever is held back (an incomplete character at the very end is emitted as-is).
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  bool first_ = true;
  std::string pending_;
};

}  // namespace cohort::tokenizer
