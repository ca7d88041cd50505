// Jinja lexer: text/tag splitting with Jinja2's whitespace rules, then tag tokenization.
#include "tokenizer/jinja_lexer.h"

#include <cstring>

namespace cohort::tokenizer::jinja {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xc0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xe0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// Jinja2 normalizes every newline sequence to "\n" and drops one trailing newline
// (keep_trailing_newline=False) before lexing.
std::string Normalize(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      out += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      out += source[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  Result<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      size_t tag = FindTag(pos_);
      std::string text = src_.substr(pos_, (tag == std::string::npos ? src_.size() : tag) - pos_);
      if (tag == std::string::npos) {
        Emit(TokenType::kText, std::move(text), pos_);
        break;
      }
      char kind = src_[tag + 1];
      char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (sign == '-') {
        size_t end = text.size();
        while (end > 0 && IsSpace(text[end - 1])) --end;
        text.resize(end);
      } else if (sign != '+' && kind != '{') {
        LStripBlock(&text);
      }
      Emit(TokenType::kText, std::move(text), pos_);
      size_t inner = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        COHORT_RETURN_IF_ERROR(SkipComment(tag, inner));
      } else {
        COHORT_RETURN_IF_ERROR(LexTag(tag, inner, kind));
      }
    }
    Token eof;
    eof.type = TokenType::kEof;
    eof.line = LineAt(src_.size());
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  size_t FindTag(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && std::strchr("{%#", src_[p + 1]) != nullptr && src_[p + 1] != '\0') return p;
    }
    return std::string::npos;
  }

  // lstrip_blocks: spaces and tabs between a line start and a block/comment tag go away.
  void LStripBlock(std::string* text) const {
    size_t line_start = text->rfind('\n');
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    if (line_start == 0 && !line_starting_) return;
    if (line_start == text->size()) return;
    for (size_t k = line_start; k < text->size(); ++k) {
      if (!IsSpace((*text)[k])) return;
    }
    text->resize(line_start);
  }

  // After a tag closes: `-` eats all following whitespace; trim_blocks eats one newline after
  // a block or comment tag unless it was closed with `+`.
  void AfterClose(size_t close_start, size_t close_end, bool is_block) {
    pos_ = close_end;
    line_starting_ = false;
    if (close_start > 0 && src_[close_start] == '-') {
      size_t q = pos_;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      line_starting_ = q > pos_ && src_[q - 1] == '\n';
      pos_ = q;
    } else if (is_block && src_[close_start] != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      line_starting_ = true;
    }
  }

  Status SkipComment(size_t tag, size_t inner) {
    size_t end = src_.find("#}", inner);
    if (end == std::string::npos) return Unsupported(Where(tag) + "unclosed comment '{#'");
    size_t close_start = (end > inner && (src_[end - 1] == '-' || src_[end - 1] == '+')) ? end - 1 : end;
    AfterClose(close_start, end + 2, /*is_block=*/true);
    return Status::Ok();
  }

  Status LexTag(size_t tag, size_t inner, char kind) {
    bool expr = kind == '{';
    Emit(expr ? TokenType::kExprBegin : TokenType::kStmtBegin, "", tag);
    const char* close = expr ? "}}" : "%}";
    int depth = 0;
    size_t p = inner;
    while (true) {
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      if (p >= src_.size()) return Unsupported(Where(tag) + "unclosed tag '{" + std::string(1, kind) + "'");
      if (depth == 0) {
        bool marker = (src_[p] == '-' || src_[p] == '+') && src_.compare(p + 1, 2, close) == 0;
        if (marker || src_.compare(p, 2, close) == 0) {
          Emit(expr ? TokenType::kExprEnd : TokenType::kStmtEnd, "", p);
          AfterClose(p, p + (marker ? 3 : 2), /*is_block=*/!expr);
          return Status::Ok();
        }
      }
      COHORT_ASSIGN_OR_RETURN(p, LexOne(p, &depth));
    }
  }

  // Lexes one token inside a tag starting at p; returns the position after it.
  Result<size_t> LexOne(size_t p, int* depth) {
    char c = src_[p];
    if (c == '\'' || c == '"') return LexString(p);
    if (IsDigit(c)) return LexNumber(p);
    if (IsNameStart(c)) {
      size_t q = p;
      while (q < src_.size() && IsNameChar(src_[q])) ++q;
      Emit(TokenType::kName, src_.substr(p, q - p), p);
      return q;
    }
    static const char* const kTwoChar[] = {"**", "//", "==", "!=", "<=", ">="};
    for (const char* op : kTwoChar) {
      if (src_.compare(p, 2, op) == 0) {
        Emit(TokenType::kOp, op, p);
        return p + 2;
      }
    }
    if (std::strchr("()[]{}.,:|~+-*/%<>=", c) != nullptr) {
      if (c == '(' || c == '[' || c == '{') ++*depth;
      if ((c == ')' || c == ']' || c == '}') && *depth > 0) --*depth;
      Emit(TokenType::kOp, std::string(1, c), p);
      return p + 1;
    }
    return Unsupported(Where(p) + "unexpected character '" + std::string(1, c) + "' inside a tag");
  }

  Result<size_t> LexString(size_t p) {
    char quote = src_[p];
    std::string value;
    size_t q = p + 1;
    while (q < src_.size() && src_[q] != quote) {
      if (src_[q] != '\\' || q + 1 >= src_.size()) {
        value += src_[q++];
        continue;
      }
      char e = src_[q + 1];
      q += 2;
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case 'a': value += '\a'; break;
        case '0': value += '\0'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': break;  // a backslash-newline continues the literal
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (q + n > src_.size()) return Unsupported(Where(p) + "truncated \\" + std::string(1, e) + " escape");
          uint32_t cp = static_cast<uint32_t>(std::strtoul(src_.substr(q, n).c_str(), nullptr, 16));
          AppendUtf8(cp, &value);
          q += n;
          break;
        }
        default:  // Python keeps unknown escapes verbatim
          value += '\\';
          value += e;
      }
    }
    if (q >= src_.size()) return Unsupported(Where(p) + "unterminated string literal");
    Emit(TokenType::kString, std::move(value), p);
    return q + 1;
  }

  Result<size_t> LexNumber(size_t p) {
    size_t q = p;
    while (q < src_.size() && (IsDigit(src_[q]) || src_[q] == '_')) ++q;
    bool is_float = false;
    if (q + 1 < src_.size() && src_[q] == '.' && IsDigit(src_[q + 1])) {
      is_float = true;
      ++q;
      while (q < src_.size() && IsDigit(src_[q])) ++q;
    }
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t r = q + 1;
      if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
      if (r < src_.size() && IsDigit(src_[r])) {
        is_float = true;
        q = r;
        while (q < src_.size() && IsDigit(src_[q])) ++q;
      }
    }
    std::string text;
    for (size_t k = p; k < q; ++k) {
      if (src_[k] != '_') text += src_[k];
    }
    Token t;
    t.type = is_float ? TokenType::kFloat : TokenType::kInt;
    t.text = text;
    t.line = LineAt(p);
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      if (text.size() > 18) return Unsupported(Where(p) + "integer literal too large");
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
    }
    tokens_.push_back(std::move(t));
    return q;
  }

  void Emit(TokenType type, std::string text, size_t at) {
    if (type == TokenType::kText && text.empty()) return;
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = LineAt(at);
    tokens_.push_back(std::move(t));
  }

  // Positions only move forward, so the line count is kept incrementally.
  int LineAt(size_t at) {
    if (at < line_pos_) {
      line_pos_ = 0;
      line_ = 1;
    }
    for (; line_pos_ < at && line_pos_ < src_.size(); ++line_pos_) {
      if (src_[line_pos_] == '\n') ++line_;
    }
    return line_;
  }

  std::string Where(size_t at) { return "line " + std::to_string(LineAt(at)) + ": "; }

  std::string src_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  size_t line_pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> Lex(const std::string& source) {
  if (source.size() > kMaxTemplateBytes) {
    return OutOfRange("chat template is " + std::to_string(source.size()) + " bytes, limit " +
                      std::to_string(kMaxTemplateBytes));
  }
  return Lexer(Normalize(source)).Run();
}

}  // namespace cohort::tokenizer::jinja
