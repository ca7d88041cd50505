// GrammarBuilder: the rule tables a GBNF parse (grammar_parser.cc) or another front end
// fills, and the checks and flattening that turn them into a Grammar. Internal to the engine.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar.h"

namespace cohort::engine {

using Sequence = std::vector<GrammarElement>;
using Alternatives = std::vector<Sequence>;

struct CodeRange {
  uint32_t lo, hi;
};

// Builds rules while parsing; Finish() checks and flattens them.
class GrammarBuilder {
 public:
  using Op = GrammarElement::Op;
  explicit GrammarBuilder(const GrammarLimits& limits) : limits_(limits) {}

  uint32_t RuleId(const std::string& name) {
    auto [it, inserted] = names_.emplace(name, static_cast<uint32_t>(rules_.size()));
    if (inserted) {
      rules_.emplace_back();
      rule_names_.push_back(name);
      defined_.push_back(false);
    }
    return it->second;
  }
  Result<uint32_t> NewRule(Alternatives alts) {
    if (rules_.size() >= limits_.max_rules) return InvalidArgument("grammar: more than " + std::to_string(limits_.max_rules) + " rules");
    const uint32_t id = static_cast<uint32_t>(rules_.size());
    rules_.push_back(std::move(alts));
    rule_names_.push_back("<anonymous " + std::to_string(id) + ">");
    defined_.push_back(true);
    return id;
  }
  Status Define(uint32_t id, Alternatives alts, int line) {
    if (defined_[id]) return InvalidArgument("grammar line " + std::to_string(line) + ": rule '" + rule_names_[id] + "' is defined twice");
    defined_[id] = true;
    rules_[id] = std::move(alts);
    return Status::Ok();
  }
  GrammarElement Bytes(const ByteSet& set) {
    auto it = std::find(byte_sets_.begin(), byte_sets_.end(), set);
    if (it == byte_sets_.end()) it = byte_sets_.insert(byte_sets_.end(), set);
    return {Op::kBytes, static_cast<uint32_t>(it - byte_sets_.begin())};
  }
  GrammarElement Byte(uint8_t b) {
    ByteSet set;
    set.Add(b);
    return Bytes(set);
  }
  // Appends one code point's UTF-8 bytes.
  void AppendCodePoint(uint32_t cp, Sequence& out);
  // The elements matching one character of the class (ranges, maybe negated).
  Result<Sequence> CharClass(std::vector<CodeRange> ranges, bool negated);
  Status CountElements(size_t n) {
    n_elements_ += n;
    if (n_elements_ > limits_.max_elements) return InvalidArgument("grammar: too large (more than " + std::to_string(limits_.max_elements) + " elements)");
    return Status::Ok();
  }
  // `item` repeated min..max times (max kUnbounded: no limit).
  Result<Sequence> Repeat(Sequence item, uint32_t min, uint32_t max);
  Result<std::shared_ptr<const Grammar>> Finish(std::string_view root);
  const GrammarLimits& limits() const { return limits_; }

 private:
  Status CheckLeftRecursion(const std::vector<bool>& nullable) const;

  GrammarLimits limits_;
  std::map<std::string, uint32_t> names_;
  std::vector<Alternatives> rules_;
  std::vector<std::string> rule_names_;
  std::vector<bool> defined_;
  std::vector<ByteSet> byte_sets_;
  size_t n_elements_ = 0;
};

}  // namespace cohort::engine
