// Recursive-descent Jinja parser (statements and expressions, Jinja2 precedence).
#include "tokenizer/jinja_parser.h"

#include <algorithm>

#include "tokenizer/jinja_lexer.h"

namespace cohort::tokenizer::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Result<Body> ParseTemplate() {
    std::string end;
    COHORT_ASSIGN_OR_RETURN(Body body, ParseBody({}, &end));
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& Peek(size_t ahead = 0) const {
    size_t k = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[k];
  }
  bool IsOp(const char* op, size_t ahead = 0) const {
    return Peek(ahead).type == TokenType::kOp && Peek(ahead).text == op;
  }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Peek(ahead).type == TokenType::kName && Peek(ahead).text == name;
  }
  Token Next() {
    Token t = Peek();
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  Status Error(const std::string& message) const {
    return Unsupported("line " + std::to_string(Peek().line) + ": " + message);
  }
  static std::string Describe(const Token& t) {
    switch (t.type) {
      case TokenType::kEof: return "end of template";
      case TokenType::kText: return "text";
      case TokenType::kExprEnd: return "'}}'";
      case TokenType::kStmtEnd: return "'%}'";
      case TokenType::kString: return "string literal";
      default: return "'" + t.text + "'";
    }
  }
  Status Expect(TokenType type, const char* what) {
    if (Peek().type != type) return Error(std::string("expected ") + what + ", found " + Describe(Peek()));
    Next();
    return Status::Ok();
  }
  Status ExpectOp(const char* op) {
    if (!IsOp(op)) return Error(std::string("expected '") + op + "', found " + Describe(Peek()));
    Next();
    return Status::Ok();
  }
  Result<std::string> ExpectName() {
    if (Peek().type != TokenType::kName) return Error("expected a name, found " + Describe(Peek()));
    return Next().text;
  }
  ExprPtr NewExpr(ExprKind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = Peek().line;
    return e;
  }

  // ---- statements ----

  // Parses nodes until a `{% name` with name in `ends` (consumed up to the name; its
  // remaining tokens are the caller's) or the end of the template when `ends` is empty.
  // The last entry of `ends` is the closing tag named in "missing" errors.
  Result<Body> ParseBody(const std::vector<std::string>& ends, std::string* end_found) {
    if (++depth_ > kMaxParseDepth) return Error("blocks nested too deeply");
    Body body;
    while (true) {
      const Token& t = Peek();
      if (t.type == TokenType::kEof) {
        if (!ends.empty()) return Error("missing {% " + ends.back() + " %} before end of template");
        break;
      }
      if (t.type == TokenType::kText) {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kText;
        node->line = t.line;
        node->text = Next().text;
        body.push_back(std::move(node));
        continue;
      }
      if (t.type == TokenType::kExprBegin) {
        Next();
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kOutput;
        node->line = t.line;
        COHORT_ASSIGN_OR_RETURN(node->expr, ParseExpression(true));
        COHORT_RETURN_IF_ERROR(Expect(TokenType::kExprEnd, "'}}'"));
        body.push_back(std::move(node));
        continue;
      }
      if (t.type != TokenType::kStmtBegin) return Error("unexpected " + Describe(t));
      if (Peek(1).type == TokenType::kName && std::find(ends.begin(), ends.end(), Peek(1).text) != ends.end()) {
        Next();
        *end_found = Next().text;
        break;
      }
      Next();
      COHORT_ASSIGN_OR_RETURN(NodePtr node, ParseStatement());
      if (node) body.push_back(std::move(node));
    }
    --depth_;
    return body;
  }

  Result<NodePtr> ParseStatement() {
    int line = Peek().line;
    COHORT_ASSIGN_OR_RETURN(std::string keyword, ExpectName());
    auto node = std::make_unique<Node>();
    node->line = line;
    if (keyword == "if") {
      COHORT_RETURN_IF_ERROR(ParseIf(node.get()));
    } else if (keyword == "for") {
      COHORT_RETURN_IF_ERROR(ParseFor(node.get()));
    } else if (keyword == "set") {
      COHORT_RETURN_IF_ERROR(ParseSet(node.get()));
    } else if (keyword == "macro") {
      COHORT_RETURN_IF_ERROR(ParseMacro(node.get()));
    } else if (keyword == "break" || keyword == "continue") {
      node->kind = keyword == "break" ? NodeKind::kBreak : NodeKind::kContinue;
      COHORT_RETURN_IF_ERROR(Expect(TokenType::kStmtEnd, "'%}'"));
    } else if (keyword == "do") {
      node->kind = NodeKind::kDo;
      COHORT_ASSIGN_OR_RETURN(node->expr, ParseExpression(true));
      COHORT_RETURN_IF_ERROR(Expect(TokenType::kStmtEnd, "'%}'"));
    } else if (keyword == "filter") {
      node->kind = NodeKind::kFilterBlock;
      node->expr = NewExpr(ExprKind::kFilter);
      COHORT_ASSIGN_OR_RETURN(node->expr->name, ExpectName());
      node->expr->children.push_back(NewExpr(ExprKind::kLiteral));
      if (IsOp("(")) COHORT_RETURN_IF_ERROR(ParseCallArgs(node->expr.get()));
      COHORT_RETURN_IF_ERROR(Expect(TokenType::kStmtEnd, "'%}'"));
      std::string end;
      COHORT_ASSIGN_OR_RETURN(node->body, ParseBody({"endfilter"}, &end));
      COHORT_RETURN_IF_ERROR(Expect(TokenType::kStmtEnd, "'%}'"));
    } else if (keyword == "generation") {
      node->kind = NodeKind::kScope;
      COHORT_RETURN_IF_ERROR(Expect(TokenType::kStmtEnd, "'%}'"));
      std::string end;
      COHORT_ASSIGN_OR_RETURN(node->body, ParseBody({"endgeneration"}, &end));
      COHORT_RETURN_IF_ERROR(Expect(TokenType::kStmtEnd, "'%}'"));
    } else {
      return Unsupported("line " + std::to_string(line) + ": unsupported statement '{% " + keyword + " %}'");
    }
    return node;
  }

  Status ParseIf(Node* node) {
    node->kind = NodeKind::kIf;
    std::string end = "elif";
    while (end == "elif") {
      COHORT_ASSIGN_OR_RETURN(ExprPtr cond, ParseExpression(true));
      COHORT_RETURN_IF_ERROR(Expect(TokenType::kStmtEnd, "'%}'"));
      COHORT_ASSIGN_OR_RETURN(Body body, ParseBody({"elif", "else", "endif"}, &end));
      node->branches.emplace_back(std::move(cond), std::move(body));
    }
    if (end == "else") {
      COHORT_RETURN_IF_ERROR(Expect(TokenType::kStmtEnd, "'%}'"));
      COHORT_ASSIGN_OR_RETURN(node->else_body, ParseBody({"endif"}, &end));
    }
    return Expect(TokenType::kStmtEnd, "'%}'");
  }

  Status ParseFor(Node* node) {
    node->kind = NodeKind::kFor;
    bool paren = IsOp("(");
    if (paren) Next();
    do {
      COHORT_ASSIGN_OR_RETURN(std::string target, ExpectName());
      node->targets.push_back(target);
    } while (IsOp(",") && (Next(), true));
    if (paren) COHORT_RETURN_IF_ERROR(ExpectOp(")"));
    if (!IsName("in")) return Error("expected 'in' in for loop, found " + Describe(Peek()));
    Next();
    // No conditional expression here: a trailing `if` filters the loop instead.
    COHORT_ASSIGN_OR_RETURN(node->expr, ParseExpression(false));
    if (IsName("if")) {
      Next();
      COHORT_ASSIGN_OR_RETURN(node->filter, ParseExpression(true));
    }
    if (IsName("recursive")) return Error("recursive for loops are not supported");
    COHORT_RETURN_IF_ERROR(Expect(TokenType::kStmtEnd, "'%}'"));
    std::string end;
    COHORT_ASSIGN_OR_RETURN(node->body, ParseBody({"else", "endfor"}, &end));
    if (end == "else") {
      COHORT_RETURN_IF_ERROR(Expect(TokenType::kStmtEnd, "'%}'"));
      COHORT_ASSIGN_OR_RETURN(node->else_body, ParseBody({"endfor"}, &end));
    }
    return Expect(TokenType::kStmtEnd, "'%}'");
  }

  Status ParseSet(Node* node) {
    COHORT_ASSIGN_OR_RETURN(node->text, ExpectName());
    if (IsOp(".")) {
      Next();
      COHORT_ASSIGN_OR_RETURN(node->attr, ExpectName());
    }
    if (IsOp(",")) return Error("tuple unpacking in {% set %} is not supported");
    if (Peek().type == TokenType::kStmtEnd && node->attr.empty()) {
      node->kind = NodeKind::kSetBlock;
      Next();
      std::string end;
      COHORT_ASSIGN_OR_RETURN(node->body, ParseBody({"endset"}, &end));
      return Expect(TokenType::kStmtEnd, "'%}'");
    }
    node->kind = NodeKind::kSet;
    COHORT_RETURN_IF_ERROR(ExpectOp("="));
    COHORT_ASSIGN_OR_RETURN(node->expr, ParseTupleOrExpression());
    return Expect(TokenType::kStmtEnd, "'%}'");
  }

  Status ParseMacro(Node* node) {
    node->kind = NodeKind::kMacro;
    COHORT_ASSIGN_OR_RETURN(node->text, ExpectName());
    COHORT_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      COHORT_ASSIGN_OR_RETURN(std::string param, ExpectName());
      ExprPtr default_value;
      if (IsOp("=")) {
        Next();
        COHORT_ASSIGN_OR_RETURN(default_value, ParseExpression(true));
      }
      node->params.emplace_back(param, std::move(default_value));
      if (!IsOp(",")) break;
      Next();
    }
    COHORT_RETURN_IF_ERROR(ExpectOp(")"));
    COHORT_RETURN_IF_ERROR(Expect(TokenType::kStmtEnd, "'%}'"));
    std::string end;
    COHORT_ASSIGN_OR_RETURN(node->body, ParseBody({"endmacro"}, &end));
    if (Peek().type == TokenType::kName) Next();  // `{% endmacro name %}`
    return Expect(TokenType::kStmtEnd, "'%}'");
  }

  // ---- expressions (lowest precedence first) ----

  // `a, b` without brackets is a tuple in `set x = a, b`.
  Result<ExprPtr> ParseTupleOrExpression() {
    COHORT_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(true));
    if (!IsOp(",")) return first;
    ExprPtr list = NewExpr(ExprKind::kList);
    list->children.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      COHORT_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
      list->children.push_back(std::move(item));
    }
    return list;
  }

  Result<ExprPtr> ParseExpression(bool with_condexpr) {
    if (++depth_ > kMaxParseDepth) return Error("expression nested too deeply");
    COHORT_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
    while (with_condexpr && IsName("if")) {
      Next();
      ExprPtr ternary = NewExpr(ExprKind::kTernary);
      COHORT_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
      ExprPtr otherwise;
      if (IsName("else")) {
        Next();
        COHORT_ASSIGN_OR_RETURN(otherwise, ParseExpression(true));
      }
      ternary->children.push_back(std::move(expr));
      ternary->children.push_back(std::move(cond));
      ternary->children.push_back(std::move(otherwise));
      expr = std::move(ternary);
    }
    --depth_;
    return expr;
  }

  Result<ExprPtr> ParseOr() {
    COHORT_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsName("or")) {
      Next();
      COHORT_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      left = Combine(ExprKind::kOr, "or", std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseAnd() {
    COHORT_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (IsName("and")) {
      Next();
      COHORT_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      left = Combine(ExprKind::kAnd, "and", std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseNot() {
    if (IsName("not")) {
      if (++depth_ > kMaxParseDepth) return Error("expression nested too deeply");
      ExprPtr node = NewExpr(ExprKind::kUnary);
      Next();
      node->name = "not";
      COHORT_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      node->children.push_back(std::move(operand));
      --depth_;
      return node;
    }
    return ParseCompare();
  }

  Result<ExprPtr> ParseCompare() {
    COHORT_ASSIGN_OR_RETURN(ExprPtr left, ParseMath1());
    while (true) {
      std::string op;
      if (Peek().type == TokenType::kOp &&
          (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp(">") || IsOp("<=") || IsOp(">="))) {
        op = Next().text;
      } else if (IsName("in")) {
        Next();
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        Next();
        Next();
        op = "not in";
      } else {
        return left;
      }
      COHORT_ASSIGN_OR_RETURN(ExprPtr right, ParseMath1());
      left = Combine(ExprKind::kBinary, op, std::move(left), std::move(right));
    }
  }

  Result<ExprPtr> ParseMath1() {
    COHORT_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      std::string op = Next().text;
      COHORT_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      left = Combine(ExprKind::kBinary, op, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseConcat() {
    COHORT_ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
    while (IsOp("~")) {
      Next();
      COHORT_ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
      left = Combine(ExprKind::kBinary, "~", std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseMath2() {
    COHORT_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = Next().text;
      COHORT_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      left = Combine(ExprKind::kBinary, op, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParsePow() {
    COHORT_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (IsOp("**")) {
      Next();
      COHORT_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
      left = Combine(ExprKind::kBinary, "**", std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseUnary(bool with_filter) {
    if (++depth_ > kMaxParseDepth) return Error("expression nested too deeply");
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      node = NewExpr(ExprKind::kUnary);
      node->name = Next().text;
      COHORT_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      node->children.push_back(std::move(operand));
    } else {
      COHORT_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    COHORT_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      COHORT_ASSIGN_OR_RETURN(node, ParseFilters(std::move(node)));
    }
    --depth_;
    return node;
  }

  Result<ExprPtr> ParsePrimary();
  Result<ExprPtr> ParsePostfix(ExprPtr node);
  Result<ExprPtr> ParseFilters(ExprPtr node);
  Status ParseCallArgs(Expr* call);

  ExprPtr Combine(ExprKind kind, const std::string& op, ExprPtr left, ExprPtr right) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = left->line;
    e->name = op;
    e->children.push_back(std::move(left));
    e->children.push_back(std::move(right));
    return e;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

Result<ExprPtr> Parser::ParsePrimary() {
  const Token& t = Peek();
  ExprPtr node = NewExpr(ExprKind::kLiteral);
  switch (t.type) {
    case TokenType::kName: {
      std::string name = Next().text;
      if (name == "true" || name == "True") {
        node->literal = Value::Bool(true);
      } else if (name == "false" || name == "False") {
        node->literal = Value::Bool(false);
      } else if (name == "none" || name == "None") {
        node->literal = Value::None();
      } else {
        node->kind = ExprKind::kName;
        node->name = name;
      }
      return node;
    }
    case TokenType::kString: {
      std::string s;
      while (Peek().type == TokenType::kString) s += Next().text;  // adjacent literals join
      node->literal = Value::Str(std::move(s));
      return node;
    }
    case TokenType::kInt: node->literal = Value::Int(Next().int_value); return node;
    case TokenType::kFloat: node->literal = Value::Float(Next().float_value); return node;
    default: break;
  }
  if (IsOp("(")) {
    Next();
    if (IsOp(")")) {
      Next();
      node->kind = ExprKind::kList;
      return node;
    }
    COHORT_ASSIGN_OR_RETURN(ExprPtr inner, ParseExpression(true));
    if (IsOp(",")) {  // a tuple, represented as a list
      node->kind = ExprKind::kList;
      node->children.push_back(std::move(inner));
      while (IsOp(",")) {
        Next();
        if (IsOp(")")) break;
        COHORT_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
        node->children.push_back(std::move(item));
      }
      inner = std::move(node);
    }
    COHORT_RETURN_IF_ERROR(ExpectOp(")"));
    return inner;
  }
  if (IsOp("[") || IsOp("{")) {
    bool is_list = IsOp("[");
    Next();
    node->kind = is_list ? ExprKind::kList : ExprKind::kDict;
    const char* close = is_list ? "]" : "}";
    while (!IsOp(close)) {
      COHORT_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
      node->children.push_back(std::move(item));
      if (!is_list) {
        COHORT_RETURN_IF_ERROR(ExpectOp(":"));
        COHORT_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        node->children.push_back(std::move(value));
      }
      if (!IsOp(",")) break;
      Next();
    }
    COHORT_RETURN_IF_ERROR(ExpectOp(close));
    return node;
  }
  return Error("unexpected " + Describe(t) + " in expression");
}

Result<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".")) {
      Next();
      ExprPtr attr = NewExpr(ExprKind::kAttr);
      if (Peek().type == TokenType::kInt) {  // `x.0` is x[0]
        attr->kind = ExprKind::kIndex;
        ExprPtr index = NewExpr(ExprKind::kLiteral);
        index->literal = Value::Int(Next().int_value);
        attr->children.push_back(std::move(node));
        attr->children.push_back(std::move(index));
      } else {
        COHORT_ASSIGN_OR_RETURN(attr->name, ExpectName());
        attr->children.push_back(std::move(node));
      }
      node = std::move(attr);
    } else if (IsOp("[")) {
      Next();
      ExprPtr sub = NewExpr(ExprKind::kIndex);
      sub->children.push_back(std::move(node));
      ExprPtr parts[3];
      int part = 0;
      bool slice = false;
      while (!IsOp("]")) {
        if (IsOp(":")) {
          Next();
          slice = true;
          if (++part > 2) return Error("too many ':' in slice");
          continue;
        }
        if (parts[part]) return Error("expected ']' or ':' in subscript, found " + Describe(Peek()));
        COHORT_ASSIGN_OR_RETURN(parts[part], ParseExpression(true));
      }
      Next();
      if (slice) {
        sub->kind = ExprKind::kSlice;
        for (auto& p : parts) sub->children.push_back(std::move(p));
      } else {
        if (!parts[0]) return Error("empty subscript '[]'");
        sub->children.push_back(std::move(parts[0]));
      }
      node = std::move(sub);
    } else if (IsOp("(")) {
      ExprPtr call = NewExpr(ExprKind::kCall);
      call->children.push_back(std::move(node));
      COHORT_RETURN_IF_ERROR(ParseCallArgs(call.get()));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

Status Parser::ParseCallArgs(Expr* call) {
  COHORT_RETURN_IF_ERROR(ExpectOp("("));
  while (!IsOp(")")) {
    if (Peek().type == TokenType::kName && IsOp("=", 1)) {
      std::string key = Next().text;
      Next();
      COHORT_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      call->kwargs.emplace_back(key, std::move(value));
    } else {
      if (!call->kwargs.empty()) return Error("positional argument after keyword argument");
      COHORT_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      call->children.push_back(std::move(value));
    }
    if (!IsOp(",")) break;
    Next();
  }
  return ExpectOp(")");
}

Result<ExprPtr> Parser::ParseFilters(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      Next();
      ExprPtr filter = NewExpr(ExprKind::kFilter);
      COHORT_ASSIGN_OR_RETURN(filter->name, ExpectName());
      filter->children.push_back(std::move(node));
      if (IsOp("(")) COHORT_RETURN_IF_ERROR(ParseCallArgs(filter.get()));
      node = std::move(filter);
    } else if (IsName("is")) {
      Next();
      ExprPtr test = NewExpr(ExprKind::kTest);
      if (IsName("not")) {
        Next();
        test->negated = true;
      }
      COHORT_ASSIGN_OR_RETURN(test->name, ExpectName());
      test->children.push_back(std::move(node));
      if (IsOp("(")) {
        COHORT_RETURN_IF_ERROR(ParseCallArgs(test.get()));
      } else if (Peek().type == TokenType::kString || Peek().type == TokenType::kInt ||
                 Peek().type == TokenType::kFloat) {
        COHORT_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());  // `x is sameas 1`
        test->children.push_back(std::move(arg));
      }
      node = std::move(test);
    } else {
      return node;
    }
  }
}

}  // namespace

Result<Body> Parse(const std::string& source) {
  COHORT_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source));
  return Parser(std::move(tokens)).ParseTemplate();
}

}  // namespace cohort::tokenizer::jinja
