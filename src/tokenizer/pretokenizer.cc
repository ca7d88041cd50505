// Pre-tokenizer regex cascades (patterns as llama.cpp's llama-vocab.cpp lists them) and the
// PCRE2 splitter. llama.cpp matches on a normalised copy of the text: non-ASCII whitespace
// becomes U+000B so that `\s` means exactly its whitespace set; we do the same and then run
// real Unicode-property regexes instead of its collapsed-category emulation.
#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "tokenizer/utf8.h"

namespace cohort::tokenizer {
namespace {

// Regex bodies from llama-vocab.cpp. Non-ASCII characters are written as \x{..} escapes so
// that no editor or tool can silently normalise them (NFC would change a range's endpoint).
constexpr const char* kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen35 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kDeepseek3Main =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|"
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kSeedCoder =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kBailing =
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+";
constexpr const char* kBloom =
    " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+";

enum class Family {
  kDefault, kLlama3, kDeepseekLlm, kDeepseekCoder, kDeepseek3, kFalcon, kStarcoder, kGpt2,
  kQwen2, kQwen35, kBloom, kViking, kTekken, kChameleon, kGpt4o, kSeedCoder, kBailing,
  kNewlines,
};

std::vector<std::string> Patterns(Family family) {
  switch (family) {
    case Family::kLlama3:
      return {kLlama3};
    case Family::kDeepseekLlm:
      return {"[\r\n]",
              "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
              "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
              "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-"
              "\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
              "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"
              "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
              "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"
              "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-"
              "\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-"
              "\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}"
              "\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-"
              "\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
              "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}"
              "-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-"
              "\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-"
              "\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-"
              "\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-"
              "\\x{1E943}]+",
              "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-"
              "\\x{3002}]+",
              "\\s+$",
              "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
              "\\p{N}+"};
    case Family::kDeepseekCoder:
      return {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
              "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}"};
    case Family::kDeepseek3:
      return {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
              kDeepseek3Main};
    case Family::kFalcon:
      return {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
    case Family::kStarcoder:
      return {"\\p{N}", kGpt2};
    case Family::kGpt2:
      return {kGpt2};
    case Family::kQwen2:
      return {kQwen2};
    case Family::kQwen35:
      return {kQwen35};
    case Family::kBloom:
      return {kBloom};
    case Family::kViking:
      return {kBloom, "\\p{N}"};
    case Family::kTekken:
      return {kTekken};
    case Family::kChameleon:
      return {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
              "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", kGpt2};
    case Family::kGpt4o:
      return {kGpt4o};
    case Family::kSeedCoder:
      return {kSeedCoder};
    case Family::kBailing:
      return {kBailing};
    case Family::kNewlines:
      return {"[^\\n]+|[\\n]+"};
    case Family::kDefault:
      break;
  }
  return {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
}

struct NameRule {
  const char* name;
  Family family;
  bool clean_spaces;
  bool ignore_merges;
  bool add_bos;
  bool bos_none;
  bool spm_style = false;
};

// llama.cpp's llama_vocab::impl::load, tokenizer_pre branch, as a table.
constexpr NameRule kRules[] = {
    {"default", Family::kDefault, true, false, false, false},
    {"llama3", Family::kLlama3, true, true, true, false},
    {"llama-v3", Family::kLlama3, true, true, true, false},
    {"llama-bpe", Family::kLlama3, true, true, true, false},
    {"falcon3", Family::kLlama3, true, true, true, false},
    {"falcon-h1", Family::kLlama3, true, true, true, false},
    {"pixtral", Family::kLlama3, true, true, true, false},
    {"midm-2.0", Family::kLlama3, true, true, true, false},
    {"lfm2", Family::kLlama3, true, true, true, false},
    {"jina-v5-nano", Family::kLlama3, true, true, true, false},
    {"dbrx", Family::kLlama3, true, false, false, false},
    {"smaug-bpe", Family::kLlama3, true, false, false, false},
    {"deepseek-llm", Family::kDeepseekLlm, false, false, false, false},
    {"deepseek-coder", Family::kDeepseekCoder, false, false, false, false},
    {"deepseek-v3", Family::kDeepseek3, false, false, false, false},
    {"hunyuan-dense", Family::kDeepseek3, false, false, false, false},
    {"hy_v4", Family::kDeepseek3, false, false, false, false},
    {"joyai-llm", Family::kDeepseek3, false, false, false, false},
    {"falcon", Family::kFalcon, true, false, false, false},
    {"mpt", Family::kGpt2, true, false, false, false},
    {"starcoder", Family::kStarcoder, true, false, false, false},
    {"refact", Family::kStarcoder, true, false, false, false},
    {"command-r", Family::kStarcoder, false, false, false, false},
    {"smollm", Family::kStarcoder, false, false, false, false},
    {"codeshell", Family::kStarcoder, true, false, false, false},
    {"exaone", Family::kStarcoder, true, false, false, false},
    {"minerva-7b", Family::kStarcoder, true, false, false, false},
    {"mellum2", Family::kStarcoder, true, false, false, false},
    {"gpt-2", Family::kGpt2, true, false, false, false},
    {"phi-2", Family::kGpt2, true, false, false, false},
    {"jina-es", Family::kGpt2, true, false, false, false},
    {"jina-de", Family::kGpt2, true, false, false, false},
    {"gigachat", Family::kGpt2, true, false, false, false},
    {"jina-v2-es", Family::kGpt2, true, false, false, false},
    {"jina-v2-de", Family::kGpt2, true, false, false, false},
    {"a.x-4.0", Family::kGpt2, true, false, false, false},
    {"mellum", Family::kGpt2, true, false, false, false},
    {"modern-bert", Family::kGpt2, true, false, false, false},
    {"exaone4", Family::kGpt2, true, false, false, false},
    {"olmo", Family::kGpt2, true, false, false, false},
    {"jais", Family::kGpt2, true, false, false, false},
    {"trillion", Family::kGpt2, false, false, false, false},
    {"granite-docling", Family::kGpt2, false, false, false, false},
    {"qwen2", Family::kQwen2, false, false, false, false},
    {"deepseek-r1-qwen", Family::kQwen2, false, false, false, false},
    {"kormo", Family::kQwen2, false, false, false, false},
    {"f2llmv2", Family::kQwen2, false, false, false, false},
    {"megrez", Family::kQwen2, true, false, false, false},
    {"stablelm2", Family::kQwen2, true, false, false, false},
    {"hunyuan", Family::kQwen2, false, false, false, false},
    {"solar-open", Family::kQwen2, false, false, false, false},
    {"qwen35", Family::kQwen35, false, false, false, false},
    {"poro-chat", Family::kBloom, false, false, false, false},
    {"bloom", Family::kBloom, true, false, false, false},
    {"gpt3-finnish", Family::kBloom, true, false, false, false},
    {"viking", Family::kViking, false, false, false, false},
    {"glm4", Family::kLlama3, true, false, false, true},
    {"chatglm-bpe", Family::kLlama3, true, false, false, true},
    {"tekken", Family::kTekken, false, true, true, false},
    {"chameleon", Family::kChameleon, false, false, true, false},
    {"gpt-4o", Family::kGpt4o, false, false, false, false},
    {"llama4", Family::kGpt4o, false, false, false, false},
    {"kanana2", Family::kGpt4o, false, false, false, false},
    {"talkie", Family::kGpt4o, false, false, false, false},
    {"minimax-m2", Family::kGpt4o, false, false, false, false},
    {"seed-coder", Family::kSeedCoder, false, false, false, false},
    {"grok-2", Family::kQwen2, false, false, false, false},
    {"bailingmoe", Family::kBailing, false, false, false, false},
    {"bailingmoe2", Family::kBailing, false, false, false, false},
    {"llada-moe", Family::kBailing, false, false, false, false},
    {"gemma4", Family::kNewlines, true, false, false, false, true},
    {"granite-embed-multi-311m", Family::kNewlines, true, false, false, false, true},
};

// Non-ASCII code points llama.cpp counts as whitespace (its unicode_set_whitespace).
bool IsNonAsciiSpace(uint32_t cp) {
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace

Result<PreTokenizerSpec> LookupPreTokenizer(std::string_view name) {
  if (name.empty()) name = "default";
  for (const NameRule& rule : kRules) {
    if (name != rule.name) continue;
    PreTokenizerSpec spec;
    spec.patterns = Patterns(rule.family);
    spec.clean_spaces = rule.clean_spaces;
    spec.ignore_merges = rule.ignore_merges;
    spec.add_bos = rule.add_bos;
    spec.bos_none = rule.bos_none;
    spec.spm_style = rule.spm_style;
    return spec;
  }
  return Unsupported("tokenizer.ggml.pre '" + std::string(name) + "' is not supported");
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

Result<PreTokenizer> PreTokenizer::Compile(const std::vector<std::string>& patterns) {
  PreTokenizer out;
  for (const std::string& pattern : patterns) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    // No PCRE2_UCP: \s must stay ASCII-only because the subject carries U+000B for every
    // other whitespace character; \p{..} is Unicode-aware in UTF mode regardless.
    // DOLLAR_ENDONLY: `$` means end of piece, as in ECMAScript, not "before a final \n".
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &error, &error_offset,
                                     nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return Internal("pre-tokenizer regex does not compile at offset " +
                      std::to_string(error_offset) + ": " +
                      reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // best effort; the interpreter is the fallback
    auto compiled = std::make_unique<Compiled>();
    compiled->code = code;
    out.regexes_.push_back(std::move(compiled));
  }
  return out;
}

namespace {

struct Piece {
  size_t begin;  // code point index
  size_t end;
};

// Splits one piece with one regex: matches and the gaps between them all become pieces.
void SplitPiece(const pcre2_code* code, pcre2_match_data* match, const std::string& subject,
                const std::vector<size_t>& cp_byte, const std::vector<uint32_t>& byte_cp,
                Piece piece, std::vector<Piece>& out) {
  const size_t base = cp_byte[piece.begin];
  const size_t length = cp_byte[piece.end] - base;
  const auto* ptr = reinterpret_cast<PCRE2_SPTR>(subject.data() + base);
  size_t cursor = 0;  // bytes into the piece already emitted
  size_t start = 0;   // where the next search begins
  while (start < length) {
    const int rc = pcre2_match(code, ptr, length, start, PCRE2_NO_UTF_CHECK, match, nullptr);
    if (rc < 0) break;  // no match (or a resource limit): the rest stays one piece
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    const size_t m_begin = ov[0];
    const size_t m_end = ov[1];
    if (m_end == m_begin) {
      // An empty match emits nothing; move one character on.
      start = m_end + Utf8SeqLen(subject[base + m_end]);
      continue;
    }
    if (m_begin > cursor) out.push_back({byte_cp[base + cursor], byte_cp[base + m_begin]});
    out.push_back({byte_cp[base + m_begin], byte_cp[base + m_end]});
    cursor = m_end;
    start = m_end;
  }
  if (cursor < length) out.push_back({byte_cp[base + cursor], piece.end});
}

}  // namespace

std::vector<std::string> PreTokenizer::Split(std::string_view text) const {
  const std::vector<uint32_t> cps = DecodeUtf8Lenient(text);
  // The subject the regexes see: valid UTF-8, one character per code point of `cps`.
  std::string subject;
  subject.reserve(text.size() + 8);
  std::vector<size_t> cp_byte(cps.size() + 1);
  for (size_t i = 0; i < cps.size(); ++i) {
    cp_byte[i] = subject.size();
    uint32_t cp = cps[i];
    if (IsNonAsciiSpace(cp)) cp = 0x0B;
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xE000;  // same category (C), valid for PCRE2
    AppendUtf8(cp, subject);
  }
  cp_byte[cps.size()] = subject.size();
  std::vector<uint32_t> byte_cp(subject.size() + 1, 0);
  for (size_t i = 0; i <= cps.size(); ++i) byte_cp[cp_byte[i]] = static_cast<uint32_t>(i);

  std::vector<Piece> pieces;
  if (!cps.empty()) pieces.push_back({0, cps.size()});
  for (const auto& regex : regexes_) {
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(regex->code, nullptr);
    std::vector<Piece> next;
    next.reserve(pieces.size() * 2);
    for (const Piece& piece : pieces) {
      SplitPiece(regex->code, match, subject, cp_byte, byte_cp, piece, next);
    }
    pcre2_match_data_free(match);
    pieces = std::move(next);
  }

  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (const Piece& piece : pieces) {
    std::string word;
    for (size_t i = piece.begin; i < piece.end; ++i) AppendUtf8(cps[i], word);
    words.push_back(std::move(word));
  }
  return words;
}

}  // namespace cohort::tokenizer
