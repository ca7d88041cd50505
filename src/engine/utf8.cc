// A small strict UTF-8 scanner shared by validation and sanitising.
#include "engine/utf8.h"

#include <cstdint>

namespace cohort::engine {
namespace {

// Length of the well-formed character starting at text[i], or 0 if none starts there.
size_t CharLength(std::string_view text, size_t i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  if (b0 < 0x80) return 1;
  size_t len;
  uint32_t cp;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t len = CharLength(text, i);
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
    const size_t len = CharLength(text, i);
    if (len == 0) {
      out.append("\xEF\xBF\xBD");  // U+FFFD
      ++i;
    } else {
      out.append(text, i, len);
      i += len;
    }
  }
}

}  // namespace cohort::engine
