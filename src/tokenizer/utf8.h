// UTF-8 helpers with llama.cpp's exact leniency: how it splits bytes into characters, how it
// decodes invalid input (U+FFFD per bad byte), and GPT-2's byte <-> printable-unicode mapping.
// Also the strict checks for text leaving the engine, so that what a client receives is
// always well-formed UTF-8 whatever bytes the model's tokens spell.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::tokenizer {

constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the UTF-8 sequence a lead byte announces (1 for continuation/invalid bytes), from
// the top four bits only, as llama.cpp's SPM and BPE symbol splitting does.
inline size_t Utf8SeqLen(char lead) {
  const uint8_t high = static_cast<uint8_t>(lead) >> 4;
  return high < 0xC ? 1 : (high == 0xF ? 4 : (high == 0xE ? 3 : 2));
}

// Decodes text into code points. A byte that does not start a well-formed sequence (by
// llama.cpp's rules: lead bits and continuation bits only, overlongs and surrogates pass)
// becomes U+FFFD and decoding resumes at the next byte. Values above U+10FFFF, which llama.cpp
// cannot re-encode, also become U+FFFD.
std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text);

// Appends the UTF-8 encoding of cp (cp <= 0x10FFFF; surrogates are encoded as-is).
void AppendUtf8(uint32_t cp, std::string& out);
std::string EncodeUtf8(uint32_t cp);

// GPT-2 byte-level mapping: every byte has a printable code point standing for it.
std::string ByteToUnicode(uint8_t byte);
// The byte a GPT-2 code point stands for, or -1 if cp is not one of the 256.
int UnicodeToByte(uint32_t cp);

// Length of the longest prefix of `bytes` that does not end inside an incomplete (but so far
// valid-looking) multi-byte character.
size_t CompleteUtf8Prefix(std::string_view bytes);

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF):
// stricter than DecodeUtf8Lenient, which lets overlongs and surrogates through.
bool IsValidUtf8(std::string_view text);

// Appends `text` to `out` with every byte that does not begin a well-formed character (as
// IsValidUtf8 judges it) replaced by U+FFFD (decoding resumes at the next byte). Valid text is
// appended unchanged.
void AppendSanitizedUtf8(std::string_view text, std::string& out);

}  // namespace cohort::tokenizer
