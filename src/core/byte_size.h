// Sizes as people write them on a command line or in a config: "123", "512K", "64M", "2G".
#pragma once

#include <cstdint>
#include <string>

namespace cohort {

// Bytes of `text` (suffixes K, M, G in powers of 1024, either case; "" is 0); -1 when it is
// malformed or negative.
int64_t ParseByteSize(const std::string& text);

}  // namespace cohort
