// The loaded vocabulary as llama.cpp sees it after llama_vocab::impl::load: token texts and
// attribute bits (with its promotions of control-looking tokens), special ids, BOS/EOS flags,
// BPE merge ranks and the special-token list used to split raw text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace cohort::tokenizer {

// Token attribute bits (llama_token_attr).
namespace attr {
constexpr uint32_t kUndefined = 0;
constexpr uint32_t kUnknown = 1u << 0;
constexpr uint32_t kUnused = 1u << 1;
constexpr uint32_t kNormal = 1u << 2;
constexpr uint32_t kControl = 1u << 3;
constexpr uint32_t kUserDefined = 1u << 4;
constexpr uint32_t kByte = 1u << 5;
constexpr uint32_t kLstrip = 1u << 7;
constexpr uint32_t kRstrip = 1u << 8;
}  // namespace attr

enum class VocabKind { kSpm, kBpe };

struct Vocab {
  VocabKind kind = VocabKind::kSpm;
  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<TokenType> types;
  std::vector<uint32_t> attrs;
  std::unordered_map<std::string, int32_t> text_to_id;  // a repeated text maps to its last id

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;
  bool clean_spaces = false;
  bool ignore_merges = false;
  bool byte_encode = true;         // BPE: GPT-2 byte mapping (false for SPM-style BPE)
  bool escape_whitespace = false;  // BPE: spaces <-> U+2581 (SPM-style BPE)

  std::unordered_set<int32_t> eog;
  // Control, user-defined and unknown tokens, longest text first: matched in raw text.
  std::vector<int32_t> special_tokens;

  struct PairHash {
    size_t operator()(const std::pair<std::string, std::string>& p) const {
      return std::hash<std::string>{}(p.first) ^ (std::hash<std::string>{}(p.second) << 1);
    }
  };
  std::unordered_map<std::pair<std::string, std::string>, int32_t, PairHash> bpe_ranks;

  int32_t n() const { return static_cast<int32_t>(texts.size()); }
  bool Valid(int32_t id) const { return id >= 0 && id < n(); }
  int32_t Lookup(std::string_view text) const {
    auto it = text_to_id.find(std::string(text));
    return it == text_to_id.end() ? -1 : it->second;
  }
  int32_t BpeRank(const std::string& left, const std::string& right) const {
    auto it = bpe_ranks.find({left, right});
    return it == bpe_ranks.end() ? -1 : it->second;
  }
  // The "<0xXX>" token, or -1.
  int32_t HexByteToken(uint8_t byte) const;
  // SPM byte fallback: "<0xXX>", else the byte itself as a token, else -1.
  int32_t SpmByteToken(uint8_t byte) const;
};

// Applies llama.cpp's loading rules to raw metadata. For BPE, `spec` (the pre-tokenizer the
// caller looked up) supplies clean_spaces, ignore_merges and the BOS defaults.
Result<Vocab> BuildVocab(VocabData data, const PreTokenizerSpec& spec);

}  // namespace cohort::tokenizer
