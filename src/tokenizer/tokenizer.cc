// The llama.cpp-compatible tokenizer: special-token partitioning of raw text, SPM/BPE
// encoding of the text fragments, token pieces and detokenization, and StreamDecoder.
#include "tokenizer/tokenizer.h"

#include <optional>

#include "tokenizer/encoders.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"

namespace cohort::tokenizer {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SPM's escaped space

// C isspace() in the "C" locale, which llama.cpp uses for lstrip/rstrip around special tokens.
bool IsAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

// GPT-2 byte-level text -> bytes; a code point outside the mapping is spelled out the way
// llama.cpp's llama_decode_text does.
std::string DecodeByteLevel(const std::string& text) {
  std::string out;
  for (uint32_t cp : DecodeUtf8Lenient(text)) {
    const int byte = UnicodeToByte(cp);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
      continue;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    out += "[UNK_BYTE_0x";
    for (char c : EncodeUtf8(cp)) {
      out.push_back(kHex[static_cast<uint8_t>(c) >> 4]);
      out.push_back(kHex[static_cast<uint8_t>(c) & 15]);
    }
    out += text + "]";
  }
  return out;
}

// The byte a "<0xXX>" token stands for (strtol semantics on text[3..5)).
char ByteTokenValue(const std::string& text) {
  int value = 0;
  for (size_t i = 3; i < 5 && i < text.size(); ++i) {
    const char c = text[i];
    int digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else break;
    value = value * 16 + digit;
  }
  return static_cast<char>(value);
}

// llama.cpp's clean_up_tokenization_spaces: three passes over the detokenized bytes.
// Pass 1: " ?", " !", " .", " ," lose the space.
std::string CleanPunctuationSpaces(const std::string& in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    const char x = in[i];
    if (i > 0 && in[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) {
      out.pop_back();
    }
    out.push_back(x);
  }
  return out;
}

// Pass 2: " ' " becomes "'" (the consumed right space also stops counting as a space).
std::string CleanLoneApostrophes(std::string in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    const char x = in[i];
    if (i > 0 && x == '\'' && i + 1 < in.size() && in[i - 1] == ' ' && in[i + 1] == ' ') {
      out.pop_back();
      in[++i] = '\0';
    }
    out.push_back(x);
  }
  return out;
}

// Pass 3: " 's", " 'm", " 're", " 've" lose the space (" 't", " 'd", " 'll" keep it).
std::string CleanContractions(const std::string& in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    const char x = in[i];
    if (i > 0 && in[i - 1] == ' ' && x == '\'' && i + 1 < in.size()) {
      const char x1 = in[i + 1];
      if (x1 == 's' || x1 == 'm') {
        out.pop_back();
      } else if (x1 != 't' && x1 != 'd' && i + 2 < in.size()) {
        const char x2 = in[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) out.pop_back();
      }
    }
    out.push_back(x);
  }
  return out;
}

std::string CleanSpaces(const std::string& text) {
  return CleanContractions(CleanLoneApostrophes(CleanPunctuationSpaces(text)));
}

struct Fragment {
  int32_t token;  // -1 for raw text
  size_t offset;
  size_t length;
};

class LlamaTokenizer final : public Tokenizer {
 public:
  LlamaTokenizer(Vocab vocab, std::optional<PreTokenizer> pre)
      : vocab_(std::move(vocab)), pre_(std::move(pre)) {
    pieces_.reserve(vocab_.texts.size());
    for (int32_t id = 0; id < vocab_.n(); ++id) pieces_.push_back(RenderPiece(id));
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::string TokenToPiece(int32_t id, bool render_special) const override {
    if (!vocab_.Valid(id)) return {};
    if (!render_special && (vocab_.attrs[id] & (attr::kUnknown | attr::kControl))) return {};
    return pieces_[id];
  }
  std::string Decode(std::span<const int32_t> ids, bool render_special) const override;

  int32_t n_vocab() const override { return vocab_.n(); }
  int32_t bos() const override { return vocab_.bos; }
  int32_t eos() const override { return vocab_.eos; }
  int32_t eot() const override { return vocab_.eot; }
  bool add_bos() const override { return vocab_.add_bos; }
  bool add_eos() const override { return vocab_.add_eos; }
  bool IsEndOfGeneration(int32_t id) const override { return vocab_.eog.count(id) > 0; }
  TokenType type(int32_t id) const override {
    return vocab_.Valid(id) ? vocab_.types[id] : TokenType::kUndefined;
  }
  bool IsControl(int32_t id) const override {
    return vocab_.Valid(id) && (vocab_.attrs[id] & attr::kControl);
  }
  const std::string& text(int32_t id) const override {
    COHORT_CHECK(vocab_.Valid(id));
    return vocab_.texts[id];
  }
  int32_t Find(std::string_view text) const override { return vocab_.Lookup(text); }

 private:
  std::string RenderPiece(int32_t id) const;
  std::vector<Fragment> Partition(std::string_view text, bool parse_special) const;
  void EncodeRaw(std::string_view raw, bool prefix_space, std::vector<int32_t>& out) const;

  Vocab vocab_;
  std::optional<PreTokenizer> pre_;  // BPE only
  std::vector<std::string> pieces_;  // llama.cpp's token-to-piece cache (special = true)
};

std::string LlamaTokenizer::RenderPiece(int32_t id) const {
  const uint32_t a = vocab_.attrs[id];
  const std::string& text = vocab_.texts[id];
  if (a & (attr::kUnknown | attr::kControl | attr::kUserDefined)) return text;
  if (a & attr::kNormal) {
    const bool escaped = vocab_.kind == VocabKind::kSpm || vocab_.escape_whitespace;
    return escaped ? ReplaceAll(text, kSpaceMarker, " ") : DecodeByteLevel(text);
  }
  if (a & attr::kByte) return std::string(1, ByteTokenValue(text));
  return {};  // unused / undefined tokens render as nothing
}

// Splits raw text around special tokens, longest token text first (llama.cpp's
// tokenizer_st_partition). Control and unknown tokens count only with parse_special.
std::vector<Fragment> LlamaTokenizer::Partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, 0, text.size()});
  for (int32_t special : vocab_.special_tokens) {
    const uint32_t a = vocab_.attrs[special];
    if (!parse_special && (a & (attr::kControl | attr::kUnknown))) continue;
    const std::string& needle = vocab_.texts[special];
    std::vector<Fragment> next;
    next.reserve(fragments.size() + 2);
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t begin = f.offset;
      size_t end = f.offset + f.length;
      while (begin < end) {
        const size_t match = text.substr(0, end).find(needle, begin);
        if (match == std::string_view::npos) break;
        size_t left_end = match;
        if (a & attr::kLstrip) {
          while (left_end > begin && IsAsciiSpace(text[left_end - 1])) --left_end;
        }
        if (left_end > begin) next.push_back({-1, begin, left_end - begin});
        next.push_back({special, 0, 0});
        begin = match + needle.size();
        if (a & attr::kRstrip) {
          while (begin < end && IsAsciiSpace(text[begin])) ++begin;
        }
      }
      if (begin < end) next.push_back({-1, begin, end - begin});
    }
    fragments = std::move(next);
  }
  return fragments;
}

void LlamaTokenizer::EncodeRaw(std::string_view raw, bool prefix_space,
                               std::vector<int32_t>& out) const {
  if (vocab_.kind == VocabKind::kSpm) {
    std::string text = prefix_space ? " " : "";
    text.append(raw);
    SpmEncode(vocab_, ReplaceAll(text, " ", kSpaceMarker), out);
    return;
  }
  const std::vector<std::string> words =
      vocab_.escape_whitespace ? pre_->Split(ReplaceAll(raw, " ", kSpaceMarker)) : pre_->Split(raw);
  for (const std::string& word : words) {
    if (!vocab_.byte_encode) {
      BpeEncodeWord(vocab_, word, out);
      continue;
    }
    std::string encoded;
    encoded.reserve(word.size() * 2);
    for (char c : word) encoded += ByteToUnicode(static_cast<uint8_t>(c));
    BpeEncodeWord(vocab_, encoded, out);
  }
}

std::vector<int32_t> LlamaTokenizer::Encode(std::string_view text, bool add_special,
                                            bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  // SPM prefixes a space to the first fragment and to every fragment after a special token.
  bool prev_special = true;
  for (const Fragment& f : Partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    EncodeRaw(text.substr(f.offset, f.length), vocab_.add_space_prefix && prev_special, out);
    prev_special = false;
  }
  if (add_special && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
  return out;
}

std::string LlamaTokenizer::Decode(std::span<const int32_t> ids, bool render_special) const {
  std::string text;
  bool remove_space = vocab_.add_space_prefix;  // undo the encoder's prefix space once
  for (int32_t id : ids) {
    std::string piece = TokenToPiece(id, render_special);
    if (remove_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    remove_space = false;
    text += piece;
  }
  if (vocab_.clean_spaces) text = CleanSpaces(text);
  return text;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromVocab(VocabData data) {
  std::optional<PreTokenizer> pre;
  PreTokenizerSpec spec;
  if (data.model == "gemma4") data.pre = "gemma4";  // llama.cpp ignores the stored name
  if (data.model == "gpt2" || data.model == "gemma4") {
    COHORT_ASSIGN_OR_RETURN(spec, LookupPreTokenizer(data.pre));
    COHORT_ASSIGN_OR_RETURN(PreTokenizer compiled, PreTokenizer::Compile(spec.patterns));
    pre.emplace(std::move(compiled));
  }
  COHORT_ASSIGN_OR_RETURN(Vocab vocab, BuildVocab(std::move(data), spec));
  return std::unique_ptr<Tokenizer>(new LlamaTokenizer(std::move(vocab), std::move(pre)));
}

std::string StreamDecoder::Push(int32_t id) {
  pending_ += tokenizer_.TokenToPiece(id, render_special_);
  const size_t complete = CompleteUtf8Prefix(pending_);
  std::string out = pending_.substr(0, complete);
  pending_.erase(0, complete);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace cohort::tokenizer
