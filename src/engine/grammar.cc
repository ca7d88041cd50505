// The GBNF parser and compiler: text -> rules of alternatives of elements, repetitions
// expanded into helper rules (x* as r ::= x r | ε, right recursion, which the matcher runs
// without growing its stack), character classes split into UTF-8 byte sequences, then the
// checks (every rule defined, none left-recursive) and the flattening into Grammar's arrays.
#include "engine/grammar.h"

#include <algorithm>
#include <utility>

#include "engine/grammar_builder.h"

namespace cohort::engine {

using Op = GrammarElement::Op;

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kUnbounded = UINT32_MAX;

// One UTF-8 encoding of a code point range: per byte position, the byte range.
using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

int EncodedLength(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void Encode(uint32_t cp, uint8_t* out) {
  switch (EncodedLength(cp)) {
    case 1: out[0] = static_cast<uint8_t>(cp); break;
    case 2: out[0] = 0xC0 | (cp >> 6); out[1] = 0x80 | (cp & 0x3F); break;
    case 3: out[0] = 0xE0 | (cp >> 12); out[1] = 0x80 | ((cp >> 6) & 0x3F); out[2] = 0x80 | (cp & 0x3F); break;
    default:
      out[0] = 0xF0 | (cp >> 18); out[1] = 0x80 | ((cp >> 12) & 0x3F);
      out[2] = 0x80 | ((cp >> 6) & 0x3F); out[3] = 0x80 | (cp & 0x3F);
  }
}

// Splits [lo, hi] (no surrogates) into ranges whose encodings are byte-range products, the
// method of RE2 and Rust's regex-syntax: first by encoded length, then until every
// continuation byte spans its whole range or a single prefix.
void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<ByteRanges>& out) {
  if (lo > hi) return;
  static constexpr uint32_t kLimits[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t limit : kLimits) {
    if (lo <= limit && hi > limit) {
      Utf8Sequences(lo, limit, out);
      Utf8Sequences(limit + 1, hi, out);
      return;
    }
  }
  const int n = EncodedLength(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Utf8Sequences(lo, lo | m, out);
        Utf8Sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Utf8Sequences(lo, (hi & ~m) - 1, out);
        Utf8Sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  Encode(lo, a);
  Encode(hi, b);
  ByteRanges seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

}  // namespace

void GrammarBuilder::AppendCodePoint(uint32_t cp, Sequence& out) {
  uint8_t buf[4];
  Encode(cp, buf);
  for (int i = 0; i < EncodedLength(cp); ++i) out.push_back(Byte(buf[i]));
}

Result<Sequence> GrammarBuilder::CharClass(std::vector<CodeRange> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end(), [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  std::vector<CodeRange> merged;
  for (const CodeRange& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  if (negated) {
    std::vector<CodeRange> inverse;
    uint32_t next = 0;
    for (const CodeRange& r : merged) {
      if (r.lo > next) inverse.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= kMaxCodePoint) inverse.push_back({next, kMaxCodePoint});
    merged = std::move(inverse);
  }
  // Surrogates have no UTF-8 encoding: cut them out.
  std::vector<ByteRanges> seqs;
  for (const CodeRange& r : merged) {
    if (r.hi < 0xD800 || r.lo > 0xDFFF) {
      Utf8Sequences(r.lo, r.hi, seqs);
    } else {
      if (r.lo < 0xD800) Utf8Sequences(r.lo, 0xD7FF, seqs);
      if (r.hi > 0xDFFF) Utf8Sequences(0xE000, r.hi, seqs);
    }
  }
  if (seqs.empty()) return InvalidArgument("grammar: a character class matches nothing");
  // All one-byte sequences share one element; longer ones become alternatives of a rule.
  ByteSet ascii;
  bool any_ascii = false;
  Alternatives alts;
  for (const ByteRanges& seq : seqs) {
    if (seq.size() == 1) {
      ascii.AddRange(seq[0].first, seq[0].second);
      any_ascii = true;
      continue;
    }
    Sequence alt;
    for (auto [lo, hi] : seq) {
      ByteSet set;
      set.AddRange(lo, hi);
      alt.push_back(Bytes(set));
    }
    alts.push_back(std::move(alt));
  }
  if (alts.empty()) return Sequence{Bytes(ascii)};
  if (any_ascii) alts.insert(alts.begin(), Sequence{Bytes(ascii)});
  COHORT_ASSIGN_OR_RETURN(uint32_t rule, NewRule(std::move(alts)));
  return Sequence{{Op::kRule, rule}};
}

Result<Sequence> GrammarBuilder::Repeat(Sequence item, uint32_t min, uint32_t max) {
  if (min > limits_.max_repeat || (max != kUnbounded && max > limits_.max_repeat)) {
    return InvalidArgument("grammar: a repetition count is above " + std::to_string(limits_.max_repeat));
  }
  if (max != kUnbounded && max < min) return InvalidArgument("grammar: a repetition {m,n} has n < m");
  if (item.size() != 1) {
    COHORT_ASSIGN_OR_RETURN(uint32_t wrapped, NewRule({std::move(item)}));
    item = {{Op::kRule, wrapped}};
  }
  Sequence out(min, item[0]);
  if (max == kUnbounded) {
    // r ::= item r | ε
    COHORT_ASSIGN_OR_RETURN(uint32_t r, NewRule({}));
    rules_[r] = {{item[0], {Op::kRule, r}}, {}};
    out.push_back({Op::kRule, r});
  } else if (max > min) {
    // r1 ::= item | ε ; rk ::= item r(k-1) | ε: at most max - min more, nested.
    COHORT_ASSIGN_OR_RETURN(uint32_t prev, NewRule({{item[0]}, {}}));
    for (uint32_t k = 1; k < max - min; ++k) {
      COHORT_ASSIGN_OR_RETURN(prev, NewRule({{item[0], {Op::kRule, prev}}, {}}));
    }
    out.push_back({Op::kRule, prev});
  }
  COHORT_RETURN_IF_ERROR(CountElements(out.size() + 2 * (max == kUnbounded ? 1 : max - min)));
  return out;
}

Status GrammarBuilder::CheckLeftRecursion(const std::vector<bool>& nullable) const {
  // Edge a -> b when b can come first in a (everything before it nullable); a cycle is left
  // recursion.
  const size_t n = rules_.size();
  std::vector<std::vector<uint32_t>> first(n);
  for (size_t r = 0; r < n; ++r) {
    for (const Sequence& alt : rules_[r]) {
      for (const GrammarElement& e : alt) {
        if (e.op != Op::kRule) break;
        first[r].push_back(e.arg);
        if (!nullable[e.arg]) break;
      }
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  for (size_t start = 0; start < n; ++start) {
    if (color[start] != 0) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(start), 0}};
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == first[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t to = first[r][next++];
      if (color[to] == 1) return InvalidArgument("grammar: rule '" + rule_names_[to] + "' is left-recursive");
      if (color[to] == 0) {
        color[to] = 1;
        path.push_back({to, 0});
      }
    }
  }
  return Status::Ok();
}

Result<std::shared_ptr<const Grammar>> GrammarBuilder::Finish(std::string_view root) {
  auto it = names_.find(std::string(root));
  if (it == names_.end() || !defined_[it->second]) {
    return InvalidArgument("grammar: no rule '" + std::string(root) + "' to start from");
  }
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (!defined_[r]) return InvalidArgument("grammar: rule '" + rule_names_[r] + "' is used but not defined");
  }
  // Nullable rules by fixed point, for the left-recursion check.
  std::vector<bool> nullable(rules_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (nullable[r]) continue;
      for (const Sequence& alt : rules_[r]) {
        const bool all = std::all_of(alt.begin(), alt.end(), [&](const GrammarElement& e) {
          return e.op == Op::kRule && nullable[e.arg];
        });
        if (all) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  COHORT_RETURN_IF_ERROR(CheckLeftRecursion(nullable));
  auto g = std::make_shared<Grammar>();
  g->root_ = it->second;
  g->byte_sets_ = byte_sets_;
  g->rule_alts_.push_back(0);
  for (const Alternatives& alts : rules_) {
    for (const Sequence& alt : alts) {
      g->alt_starts_.push_back(static_cast<uint32_t>(g->elements_.size()));
      g->elements_.insert(g->elements_.end(), alt.begin(), alt.end());
      g->elements_.push_back({Op::kEnd, 0});
    }
    g->rule_alts_.push_back(static_cast<uint32_t>(g->alt_starts_.size()));
  }
  if (g->elements_.size() > limits_.max_elements) return InvalidArgument("grammar: too large");
  return std::shared_ptr<const Grammar>(std::move(g));
}

}  // namespace cohort::engine
