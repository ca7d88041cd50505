// Jinja parser: turns the lexer's tokens into a statement tree, with Jinja2's operator
// precedence. Anything outside the supported subset is a kUnsupported Status naming the
// construct and its line.
#pragma once

#include <string>

#include "core/status.h"
#include "tokenizer/jinja_ast.h"

namespace cohort::tokenizer::jinja {

// Nesting beyond this (blocks or expression depth) is refused rather than risking the stack.
inline constexpr int kMaxParseDepth = 200;

Result<Body> Parse(const std::string& source);

}  // namespace cohort::tokenizer::jinja
