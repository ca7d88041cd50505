// Grammar: a context-free grammar over bytes, compiled from GBNF text (the grammar format
// llama.cpp and llama-server accept) for constrained decoding. Character classes and literals
// are lowered to UTF-8 byte sequences, so the matcher (grammar_matcher.h) walks token byte
// strings directly. Compilation rejects undefined rules and left recursion, which would make
// the matcher's stack expansion loop forever.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace cohort::engine {

// A set of byte values, one bit each.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool Has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1u; }
  void Add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

struct GrammarElement {
  enum class Op : uint8_t {
    kEnd,    // ends an alternative
    kRule,   // a reference to rule `arg`
    kBytes,  // one byte from byte set `arg`
  };
  Op op = Op::kEnd;
  uint32_t arg = 0;
};

// Bounds that keep a hostile grammar from taking unbounded memory or time to compile.
struct GrammarLimits {
  size_t max_source_bytes = 1 << 20;
  size_t max_elements = 1 << 20;  // after repetitions are expanded
  size_t max_rules = 1 << 16;
  uint32_t max_repeat = 4096;     // the largest n in x{m,n}
};

// An immutable compiled grammar, shared by every request that uses it.
class Grammar {
 public:
  // Parses GBNF: `name ::= alternatives`, "literals" with \n \r \t \\ \" \xHH \uHHHH
  // \UHHHHHHHH escapes, [character classes] (ranges, ^ negation), `.` (any character),
  // (groups), rule references, postfix * + ? {m} {m,} {m,n}, and # comments. `root` names
  // the start rule. Errors are kInvalidArgument with the line.
  static Result<std::shared_ptr<const Grammar>> Parse(std::string_view gbnf, std::string_view root = "root",
                                                      const GrammarLimits& limits = {});

  // Flattened alternatives: each alternative is a run of elements closed by kEnd.
  const std::vector<GrammarElement>& elements() const { return elements_; }
  // Start positions in elements() of rule `rule`'s alternatives.
  std::span<const uint32_t> alternatives(uint32_t rule) const {
    return {alt_starts_.data() + rule_alts_[rule], alt_starts_.data() + rule_alts_[rule + 1]};
  }
  const ByteSet& byte_set(uint32_t id) const { return byte_sets_[id]; }
  uint32_t root() const { return root_; }
  size_t n_rules() const { return rule_alts_.size() - 1; }

 private:
  friend class GrammarBuilder;
  std::vector<GrammarElement> elements_;
  std::vector<uint32_t> alt_starts_;  // every alternative's first element
  std::vector<uint32_t> rule_alts_;   // [n_rules + 1] rule r's alternatives: [r, r+1)
  std::vector<ByteSet> byte_sets_;
  uint32_t root_ = 0;
};

}  // namespace cohort::engine
