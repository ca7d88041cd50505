// UTF-8 decoding/encoding and the GPT-2 byte mapping, matching llama.cpp's unicode.cpp rules.
#include "tokenizer/utf8.h"

#include <array>

namespace cohort::tokenizer {
namespace {

bool IsCont(uint8_t b) { return (b & 0xC0) == 0x80; }

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
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b0 = s[i];
    if (b0 < 0x80) {
      out.push_back(b0);
      i += 1;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((b0 & 0xE0) == 0xC0) {
      len = 2;
      cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3;
      cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4;
      cp = b0 & 0x07;
    }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = IsCont(s[i + k]);
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (!ok) {
      out.push_back(kReplacementChar);
      i += 1;
      continue;
    }
    out.push_back(cp > 0x10FFFF ? kReplacementChar : cp);
    i += len;
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

}  // namespace cohort::tokenizer
