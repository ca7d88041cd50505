// UTF-8 decoding/encoding and the GPT-2 byte mapping, matching llama.cpp's unicode.cpp rules,
// and the strict validation and sanitising built on the same sequence scanner.
#include "tokenizer/utf8.h"

#include <array>

namespace cohort::tokenizer {
namespace {

bool IsCont(uint8_t b) { return (b & 0xC0) == 0x80; }

// A sequence read from a lead byte and its continuation bytes: `len` 0 when none starts there.
struct Sequence {
  size_t len = 0;
  uint32_t cp = 0;
};

// The sequence starting at text[i] by lead and continuation bits alone (llama.cpp's rule):
// overlong forms, surrogates and values past U+10FFFF are returned for the caller to judge.
Sequence ScanSequence(std::string_view text, size_t i) {
  const auto b0 = static_cast<uint8_t>(text[i]);
  if (b0 < 0x80) return {1, b0};
  Sequence seq;
  if ((b0 & 0xE0) == 0xC0) {
    seq = {2, b0 & 0x1Fu};
  } else if ((b0 & 0xF0) == 0xE0) {
    seq = {3, b0 & 0x0Fu};
  } else if ((b0 & 0xF8) == 0xF0) {
    seq = {4, b0 & 0x07u};
  } else {
    return {};
  }
  if (i + seq.len > text.size()) return {};
  for (size_t k = 1; k < seq.len; ++k) {
    const auto b = static_cast<uint8_t>(text[i + k]);
    if (!IsCont(b)) return {};
    seq.cp = (seq.cp << 6) | (b & 0x3F);
  }
  return seq;
}

// Length of the well-formed character starting at text[i], or 0 if none starts there.
size_t StrictCharLength(std::string_view text, size_t i) {
  const Sequence seq = ScanSequence(text, i);
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};  // below: overlong
  if (seq.len == 0 || seq.cp < kMin[seq.len] || seq.cp > 0x10FFFF) return 0;
  if (seq.cp >= 0xD800 && seq.cp <= 0xDFFF) return 0;  // a surrogate
  return seq.len;
}

// The byte -> code point table of GPT-2: printable Latin-1 bytes map to themselves, the
// remaining 68 bytes map to 256, 257, ... in byte order.
struct ByteTables {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<int16_t, 324> cp_to_byte{};  // code points 0..323
  ByteTables() {
    cp_to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : 256u + extra++;
      byte_to_cp[b] = cp;
      cp_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables tables;  // immutable after construction, thread-safe init
  return tables;
}

}  // namespace

std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const Sequence seq = ScanSequence(text, i);
    if (seq.len == 0) {
      out.push_back(kReplacementChar);
      i += 1;
      continue;
    }
    out.push_back(seq.cp > 0x10FFFF ? kReplacementChar : seq.cp);
    i += seq.len;
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp <= 0x7F) {
    out.push_back(static_cast<char>(cp));
  } else if (cp <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | ((cp >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(uint32_t cp) {
  std::string out;
  AppendUtf8(cp, out);
  return out;
}

std::string ByteToUnicode(uint8_t byte) { return EncodeUtf8(Tables().byte_to_cp[byte]); }

int UnicodeToByte(uint32_t cp) {
  const auto& table = Tables().cp_to_byte;
  return cp < table.size() ? table[cp] : -1;
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  const size_t n = bytes.size();
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<uint8_t>(bytes[n - back]);
    if (IsCont(b)) continue;
    if (b >= 0xC0) {
      const size_t need = Utf8SeqLen(static_cast<char>(b));
      if (need > back) return n - back;
    }
    break;
  }
  return n;
}

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t len = StrictCharLength(text, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

void AppendSanitizedUtf8(std::string_view text, std::string& out) {
  if (IsValidUtf8(text)) {
    out.append(text);
    return;
  }
  for (size_t i = 0; i < text.size();) {
    const size_t len = StrictCharLength(text, i);
    if (len == 0) {
      out.append("\xEF\xBF\xBD");  // U+FFFD
      ++i;
    } else {
      out.append(text, i, len);
      i += len;
    }
  }
}

}  // namespace cohort::tokenizer
