// Strict UTF-8 checks for text leaving the engine: what a client receives is always
// well-formed UTF-8, whatever bytes the model's tokens spell.
#pragma once

#include <string>
#include <string_view>

namespace cohort::engine {

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF).
bool IsValidUtf8(std::string_view text);

// Appends `text` to `out` with every byte that does not begin a well-formed character
// replaced by U+FFFD (decoding resumes at the next byte). Valid text is appended unchanged.
void AppendSanitizedUtf8(std::string_view text, std::string& out);

}  // namespace cohort::engine
