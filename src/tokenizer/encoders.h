// The two subword algorithms on already-split text: SentencePiece-style bigram merging by
// score (SPM) and byte-level BPE merging by merge rank, with llama.cpp's tie-breaking.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace cohort::tokenizer {

// Tokenizes one raw-text fragment whose spaces are already escaped to U+2581 (and prefixed).
void SpmEncode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

// Tokenizes one pre-tokenized, byte-encoded word.
void BpeEncodeWord(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out);

}  // namespace cohort::tokenizer
