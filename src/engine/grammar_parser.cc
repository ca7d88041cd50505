// GBNF text -> GrammarBuilder calls: a recursive-descent parser over the source bytes. A rule
// runs until the next `name ::=` or the end, so rules may span lines as llama.cpp allows.
#include <string>

#include "engine/grammar.h"
#include "engine/grammar_builder.h"

namespace cohort::engine {
namespace {

using Op = GrammarElement::Op;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  Parser(std::string_view src, GrammarBuilder& builder) : src_(src), b_(builder) {}

  Status ParseAll() {
    SkipSpace();
    while (pos_ < src_.size()) {
      const int line = line_;
      const std::string name = Name();
      if (name.empty()) return Error("expected a rule name");
      SkipSpace();
      if (src_.compare(pos_, 3, "::=") != 0) return Error("expected '::=' after '" + name + "'");
      pos_ += 3;
      const uint32_t id = b_.RuleId(name);
      COHORT_ASSIGN_OR_RETURN(Alternatives alts, ParseAlternatives(0));
      COHORT_RETURN_IF_ERROR(b_.Define(id, std::move(alts), line));
      SkipSpace();
    }
    return Status::Ok();
  }

 private:
  Status Error(const std::string& why) const {
    return InvalidArgument("grammar line " + std::to_string(line_) + ": " + why);
  }

  void SkipSpace() {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        line_ += c == '\n';
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string Name() {
    const size_t start = pos_;
    while (pos_ < src_.size() && IsNameChar(src_[pos_])) ++pos_;
    return std::string(src_.substr(start, pos_ - start));
  }

  // Whether a new rule (`name ::=`) starts at pos_.
  bool AtRuleStart() const {
    size_t p = pos_;
    while (p < src_.size() && IsNameChar(src_[p])) ++p;
    if (p == pos_) return false;
    while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\r' || src_[p] == '\n')) ++p;
    return src_.compare(p, 3, "::=") == 0;
  }

  Result<Alternatives> ParseAlternatives(int depth) {
    if (depth > 256) return Error("groups nested too deep");
    Alternatives alts;
    while (true) {
      COHORT_ASSIGN_OR_RETURN(Sequence seq, ParseSequence(depth));
      alts.push_back(std::move(seq));
      SkipSpace();
      if (pos_ < src_.size() && src_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return alts;
    }
  }

  Result<Sequence> ParseSequence(int depth) {
    Sequence seq;
    while (true) {
      SkipSpace();
      if (pos_ >= src_.size() || src_[pos_] == '|' || src_[pos_] == ')' || AtRuleStart()) return seq;
      const size_t item_start = seq.size();
      COHORT_RETURN_IF_ERROR(ParseItem(depth, seq));
      COHORT_RETURN_IF_ERROR(ParsePostfix(item_start, seq));
    }
  }

  Status ParseItem(int depth, Sequence& seq) {
    const char c = src_[pos_];
    if (c == '"') return ParseLiteral(seq);
    if (c == '[') return ParseClass(seq);
    if (c == '.') {
      ++pos_;
      COHORT_ASSIGN_OR_RETURN(Sequence any, b_.CharClass({}, true));
      seq.insert(seq.end(), any.begin(), any.end());
      return Status::Ok();
    }
    if (c == '(') {
      ++pos_;
      COHORT_ASSIGN_OR_RETURN(Alternatives alts, ParseAlternatives(depth + 1));
      SkipSpace();
      if (pos_ >= src_.size() || src_[pos_] != ')') return Error("expected ')'");
      ++pos_;
      COHORT_ASSIGN_OR_RETURN(uint32_t rule, b_.NewRule(std::move(alts)));
      seq.push_back({Op::kRule, rule});
      return Status::Ok();
    }
    if (IsNameChar(c)) {
      seq.push_back({Op::kRule, b_.RuleId(Name())});
      return Status::Ok();
    }
    return Error(std::string("unexpected character '") + c + "'");
  }

  Status ParsePostfix(size_t item_start, Sequence& seq) {
    while (true) {
      SkipSpace();
      if (pos_ >= src_.size()) return Status::Ok();
      const char c = src_[pos_];
      uint32_t min = 0, max = UINT32_MAX;
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        min = 1;
      } else if (c == '?') {
        ++pos_;
        max = 1;
      } else if (c == '{') {
        COHORT_RETURN_IF_ERROR(ParseBraces(min, max));
      } else {
        return Status::Ok();
      }
      Sequence item(seq.begin() + static_cast<ptrdiff_t>(item_start), seq.end());
      seq.resize(item_start);
      if (item.empty()) return Error("a repetition follows nothing");
      COHORT_ASSIGN_OR_RETURN(Sequence repeated, b_.Repeat(std::move(item), min, max));
      seq.insert(seq.end(), repeated.begin(), repeated.end());
    }
  }

  Result<uint32_t> Number() {
    SkipSpace();
    uint64_t v = 0;
    const size_t start = pos_;
    while (pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '9' && v <= UINT32_MAX) {
      v = v * 10 + static_cast<uint64_t>(src_[pos_++] - '0');
    }
    if (pos_ == start) return Error("expected a number in {m,n}");
    if (v >= UINT32_MAX) return Error("a repetition count is too large");
    return static_cast<uint32_t>(v);
  }

  Status ParseBraces(uint32_t& min, uint32_t& max) {
    ++pos_;  // '{'
    COHORT_ASSIGN_OR_RETURN(min, Number());
    SkipSpace();
    max = min;
    if (pos_ < src_.size() && src_[pos_] == ',') {
      ++pos_;
      SkipSpace();
      max = UINT32_MAX;
      if (pos_ < src_.size() && src_[pos_] != '}') {
        COHORT_ASSIGN_OR_RETURN(max, Number());
      }
      SkipSpace();
    }
    if (pos_ >= src_.size() || src_[pos_] != '}') return Error("expected '}'");
    ++pos_;
    return Status::Ok();
  }

  Result<uint32_t> Hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = pos_ < src_.size() ? HexValue(src_[pos_]) : -1;
      if (h < 0) return Error("bad hex escape");
      v = v * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    if (v > 0x10FFFF) return Error("escape past U+10FFFF");
    return v;
  }

  // One character of a literal or class: an escape or a UTF-8 character.
  Result<uint32_t> Char() {
    if (pos_ >= src_.size()) return Error("unexpected end inside a literal or class");
    const unsigned char c = static_cast<unsigned char>(src_[pos_]);
    if (c == '\\') {
      if (++pos_ >= src_.size()) return Error("unexpected end after '\\'");
      const char e = src_[pos_++];
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 'r': return uint32_t{'\r'};
        case 't': return uint32_t{'\t'};
        case 'x': return Hex(2);
        case 'u': return Hex(4);
        case 'U': return Hex(8);
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': return static_cast<uint32_t>(e);
        default: return Error(std::string("unknown escape '\\") + e + "'");
      }
    }
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + n > src_.size()) return Error("invalid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const unsigned char cc = static_cast<unsigned char>(src_[pos_ + i]);
      if ((cc & 0xC0) != 0x80) return Error("invalid UTF-8");
      cp = (cp << 6) | (cc & 0x3F);
    }
    pos_ += n;
    if (n == 1 && c == '\n') ++line_;
    return cp;
  }

  Status ParseLiteral(Sequence& seq) {
    ++pos_;  // '"'
    while (true) {
      if (pos_ >= src_.size()) return Error("unterminated string literal");
      if (src_[pos_] == '"') {
        ++pos_;
        return b_.CountElements(0);
      }
      COHORT_ASSIGN_OR_RETURN(uint32_t cp, Char());
      b_.AppendCodePoint(cp, seq);
      COHORT_RETURN_IF_ERROR(b_.CountElements(1));
    }
  }

  Status ParseClass(Sequence& seq) {
    ++pos_;  // '['
    bool negated = false;
    if (pos_ < src_.size() && src_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodeRange> ranges;
    while (true) {
      if (pos_ >= src_.size()) return Error("unterminated character class");
      if (src_[pos_] == ']') {
        ++pos_;
        break;
      }
      COHORT_ASSIGN_OR_RETURN(uint32_t lo, Char());
      uint32_t hi = lo;
      if (pos_ + 1 < src_.size() && src_[pos_] == '-' && src_[pos_ + 1] != ']') {
        ++pos_;
        COHORT_ASSIGN_OR_RETURN(hi, Char());
        if (hi < lo) return Error("a class range runs backwards");
      }
      ranges.push_back({lo, hi});
      if (ranges.size() > 4096) return Error("a character class is too long");
    }
    if (ranges.empty() && !negated) return Error("an empty character class");
    COHORT_ASSIGN_OR_RETURN(Sequence cls, b_.CharClass(std::move(ranges), negated));
    COHORT_RETURN_IF_ERROR(b_.CountElements(cls.size()));
    seq.insert(seq.end(), cls.begin(), cls.end());
    return Status::Ok();
  }

  std::string_view src_;
  GrammarBuilder& b_;
  size_t pos_ = 0;
  int line_ = 1;
};

}  // namespace

Result<std::shared_ptr<const Grammar>> Grammar::Parse(std::string_view gbnf, std::string_view root,
                                                      const GrammarLimits& limits) {
  if (gbnf.size() > limits.max_source_bytes) {
    return InvalidArgument("grammar: longer than " + std::to_string(limits.max_source_bytes) + " bytes");
  }
  GrammarBuilder builder(limits);
  Parser parser(gbnf, builder);
  COHORT_RETURN_IF_ERROR(parser.ParseAll());
  return builder.Finish(root);
}

}  // namespace cohort::engine
