// SPM and BPE merge loops. Both keep a doubly linked list of symbols and a priority queue of
// candidate pairs; a queued pair is stale once either side has grown or been absorbed, which a
// size check detects because symbols only ever grow.
#include "tokenizer/encoders.h"

#include <queue>
#include <string>

#include "tokenizer/utf8.h"

namespace cohort::tokenizer {
namespace {

struct Symbol {
  int32_t prev;
  int32_t next;
  size_t offset;  // into the text
  size_t n;       // bytes; 0 once merged into the left neighbour
};

// Splits text into one symbol per UTF-8 character (by lead byte, clamped at the end).
std::vector<Symbol> SplitChars(std::string_view text) {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  size_t offset = 0;
  int32_t index = 0;
  while (offset < text.size()) {
    const size_t n = std::min(Utf8SeqLen(text[offset]), text.size() - offset);
    symbols.push_back({index - 1, -1, offset, n});
    offset += n;
    if (offset < text.size()) symbols.back().next = index + 1;
    ++index;
  }
  return symbols;
}

struct Candidate {
  int32_t left;
  int32_t right;
  size_t size;   // bytes of the merged pair when queued
  float score;   // SPM: higher first
  int32_t rank;  // BPE: lower first
};

// SPM order: highest score first, then leftmost.
struct SpmWorse {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};
// BPE order: lowest merge rank first, then leftmost.
struct BpeWorse {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

// Merges `right` into `left` in the symbol list.
void Merge(std::vector<Symbol>& symbols, int32_t left, int32_t right) {
  Symbol& l = symbols[left];
  Symbol& r = symbols[right];
  l.n += r.n;
  r.n = 0;
  l.next = r.next;
  if (r.next >= 0) symbols[r.next].prev = left;
}

bool Stale(const std::vector<Symbol>& symbols, const Candidate& c) {
  const Symbol& l = symbols[c.left];
  const Symbol& r = symbols[c.right];
  return l.n == 0 || r.n == 0 || l.n + r.n != c.size;
}

}  // namespace

void SpmEncode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  std::vector<Symbol> symbols = SplitChars(text);
  std::priority_queue<Candidate, std::vector<Candidate>, SpmWorse> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t size = symbols[left].n + symbols[right].n;
    const int32_t id = vocab.Lookup(text.substr(symbols[left].offset, size));
    if (id < 0) return;
    queue.push({left, right, size, vocab.scores[id], 0});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    if (Stale(symbols, c)) continue;
    Merge(symbols, c.left, c.right);
    try_add(symbols[c.left].prev, c.left);
    try_add(c.left, symbols[c.left].next);
  }
  // Every merged symbol is a token by construction; a single character that is not falls
  // back to byte tokens (llama.cpp's resegment; its rev_merge path cannot trigger).
  for (int32_t i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].offset, symbols[i].n);
    const int32_t id = vocab.Lookup(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char ch : piece) {
      const int32_t byte_id = vocab.SpmByteToken(static_cast<uint8_t>(ch));
      // llama.cpp aborts when a vocab lacks the byte; the unknown token is the safe stand-in.
      if (byte_id >= 0) {
        out.push_back(byte_id);
      } else if (vocab.unk >= 0) {
        out.push_back(vocab.unk);
      }
    }
  }
}

void BpeEncodeWord(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out) {
  if (word.empty()) return;
  // Words that are whole tokens skip merging: always with ignore_merges, and for runs of
  // newlines in SPM-style BPE (llama.cpp's Gemma 4 fix).
  const bool newline_run =
      vocab.escape_whitespace && word.find_first_not_of('\n') == std::string_view::npos;
  if (vocab.ignore_merges || newline_run) {
    const int32_t id = vocab.Lookup(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols = SplitChars(word);
  std::priority_queue<Candidate, std::vector<Candidate>, BpeWorse> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const int32_t rank = vocab.BpeRank(std::string(word.substr(l.offset, l.n)),
                                       std::string(word.substr(r.offset, r.n)));
    if (rank < 0) return;
    queue.push({left, right, l.n + r.n, 0.0f, rank});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    if (Stale(symbols, c)) continue;
    Merge(symbols, c.left, c.right);
    try_add(symbols[c.left].prev, c.left);
    try_add(c.left, symbols[c.left].next);
  }
  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = word.substr(symbols[i].offset, symbols[i].n);
    const int32_t id = vocab.Lookup(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // llama.cpp looks each byte up (as a one-byte token, or as <0xXX> without the GPT-2 byte
    // mapping) and drops the ones that are missing.
    for (char ch : piece) {
      const int32_t byte_id = vocab.byte_encode ? vocab.Lookup(std::string_view(&ch, 1))
                                                : vocab.HexByteToken(static_cast<uint8_t>(ch));
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

}  // namespace cohort::tokenizer
