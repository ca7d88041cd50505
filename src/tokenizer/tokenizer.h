// Tokenizer: text <-> token ids for the vocabularies GGUF files carry
// (tokenizer.ggml.model "llama" = SentencePiece-style, "gpt2" = byte-level BPE, "gemma4" =
// BPE over SentencePiece-escaped text), with
// special tokens and BOS/EOS rules from the metadata, as llama.cpp applies them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
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

// The tokenizer.* metadata of a GGUF as plain values (FromGguf fills it; tests may build one by
// hand). Absent optionals take llama.cpp's defaults for the model type.
struct VocabData {
  std::string model;  // tokenizer.ggml.model: "llama" (SPM), "gpt2" (BPE), "gemma4"
  std::string pre;    // tokenizer.ggml.pre ("" = default)
  std::vector<std::string> tokens;
  std::vector<float> scores;      // empty = all 0
  std::vector<int32_t> types;     // TokenType values; empty = all normal
  std::vector<std::string> merges;  // BPE only, "left right", rank = index
  // Special token ids as stored (uint32); an id >= tokens.size() is ignored, as llama.cpp
  // does (stories260K stores 4294967295 for "none").
  std::optional<uint64_t> bos_id, eos_id, eot_id, eom_id, unk_id, sep_id, pad_id, mask_id;
  std::optional<uint64_t> fim_pre_id, fim_suf_id, fim_mid_id, fim_pad_id, fim_rep_id, fim_sep_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::string general_name;  // general.name: llama.cpp keys a Phi-3 quirk on it
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Builds the tokenizer the GGUF's tokenizer.* metadata describes.
  static Result<std::unique_ptr<Tokenizer>> FromGguf(const gguf::File& file);
  // Builds one from metadata values (the same rules; no GGUF needed).
  static Result<std::unique_ptr<Tokenizer>> FromVocab(VocabData data);
  // Reads the tokenizer.* keys of a GGUF into VocabData.
  static Result<VocabData> ReadVocab(const gguf::File& file);

  // add_special: add BOS/EOS as the metadata says (add_bos_token, add_eos_token).
  // parse_special: text matching a control/unknown token's content becomes that token;
  // user-defined tokens are always matched (llama.cpp's `parse_special`).
  // Never fails: invalid UTF-8 is tokenized as llama.cpp does (SPM: byte tokens; BPE: U+FFFD).
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;

  // The bytes one token stands for (llama_token_to_piece with lstrip 0). Control and unknown
  // tokens give "" unless `render_special`; an out-of-range id gives "".
  virtual std::string TokenToPiece(int32_t id, bool render_special) const = 0;
  // llama_detokenize(remove_special = false, unparse_special = render_special): SPM drops one
  // leading space of the first piece (the prefix the encoder added); BPE vocabularies with
  // clean_up_tokenization_spaces tidy " ." / " 's" etc. Out-of-range ids are skipped.
  virtual std::string Decode(std::span<const int32_t> ids, bool render_special) const = 0;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos() const = 0;  // -1 when absent
  virtual int32_t eos() const = 0;  // -1 when absent
  virtual int32_t eot() const = 0;  // -1 when absent
  virtual bool add_bos() const = 0;
  virtual bool add_eos() const = 0;
  // End-of-generation: eos, eot, eom and similar tokens named in the metadata.
  virtual bool IsEndOfGeneration(int32_t id) const = 0;
  // The type stored in the GGUF (kUndefined for an out-of-range id).
  virtual TokenType type(int32_t id) const = 0;
  // True for tokens llama.cpp treats as control (including ones it promotes, e.g. an
  // "<|im_end|>" stored as normal); those render only with render_special.
  virtual bool IsControl(int32_t id) const = 0;
  // The stored text of token id (for chat templates and inspection), unchecked bytes.
  virtual const std::string& text(int32_t id) const = 0;
  // The id of a token whose stored text is exactly `text`, or -1.
  virtual int32_t Find(std::string_view text) const = 0;
};

// Turns a stream of token ids into text that never ends inside a UTF-8 character: bytes of
// an incomplete character are held back until the character is complete. Pieces are joined
// as llama.cpp's server streams them (TokenToPiece, no leading-space removal).
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
  std::string pending_;
};

}  // namespace cohort::tokenizer
