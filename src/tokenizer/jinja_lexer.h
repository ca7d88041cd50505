// Jinja lexer: splits template source into text and tag tokens, applying whitespace control
// exactly as transformers' Jinja environment does (trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False, plus `-`/`+` markers), then tokenizes the inside of tags.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace cohort::tokenizer::jinja {

enum class TokenType {
  kText,        // literal template text (after whitespace control)
  kExprBegin,   // {{
  kExprEnd,     // }}
  kStmtBegin,   // {%
  kStmtEnd,     // %}
  kName,        // identifiers and keywords (if, for, and, not, true, none, ...)
  kString,      // a string literal, unescaped
  kInt,
  kFloat,
  kOp,          // punctuation and operators: ( ) [ ] { } . , : | ~ + - * / // % ** == != < > <= >= =
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;  // kText/kName/kString/kOp content
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;      // 1-based source line, for error messages
};

// Source larger than this is refused: chat templates are a few KiB.
inline constexpr size_t kMaxTemplateBytes = 1 << 20;

Result<std::vector<Token>> Lex(const std::string& source);

}  // namespace cohort::tokenizer::jinja
