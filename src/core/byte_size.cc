// ParseByteSize; see byte_size.h.
#include "core/byte_size.h"

#include <cctype>
#include <exception>

namespace cohort {

int64_t ParseByteSize(const std::string& text) {
  if (text.empty()) return 0;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return -1;
  }
  double scale = 1;
  if (used + 1 == text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[used]))) {
      case 'K': scale = 1024.0; break;
      case 'M': scale = 1024.0 * 1024; break;
      case 'G': scale = 1024.0 * 1024 * 1024; break;
      default: return -1;
    }
  } else if (used != text.size()) {
    return -1;
  }
  return value < 0 ? -1 : static_cast<int64_t>(value * scale);
}

}  // namespace cohort
