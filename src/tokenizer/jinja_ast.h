// Syntax tree of the Jinja subset: expressions (Expr) and statements (Node), produced by the
// parser and walked by the interpreter. Plain data; ownership by unique_ptr down the tree.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace cohort::tokenizer::jinja {

enum class ExprKind {
  kLiteral,  // literal
  kName,     // name
  kList,     // children = items (tuples are lists too)
  kDict,     // children = key0, value0, key1, value1, ...
  kAttr,     // children[0].name
  kIndex,    // children[0][children[1]]
  kSlice,    // children[0][children[1]:children[2]:children[3]], absent parts are null
  kCall,     // children[0](children[1..], kwargs)
  kFilter,   // children[0] | name(children[1..], kwargs)
  kTest,     // children[0] is [not] name(children[1..])
  kUnary,    // name = "-", "+" or "not"; children[0]
  kBinary,   // name = operator; children[0] op children[1]
  kAnd,
  kOr,
  kTernary,  // children[0] if children[1] else children[2] (null: undefined)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // `is not`
};

enum class NodeKind {
  kText,      // text
  kOutput,    // {{ expr }}
  kIf,        // branches, else_body
  kFor,       // for targets in expr [if filter] body [else else_body]
  kSet,       // set name[.attr] = expr
  kSetBlock,  // set name %}body{% endset
  kMacro,     // macro name(params) body
  kBreak,
  kContinue,
  kDo,        // do expr (evaluated for its side effects)
  kScope,     // a block whose body just renders ({% generation %})
  kFilterBlock,  // filter name(args) body endfilter: expr is the kFilter, children[0] unused
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  NodeKind kind = NodeKind::kText;
  int line = 0;
  std::string text;   // kText content; kSet/kSetBlock/kMacro name
  std::string attr;   // kSet: the attribute in `set ns.attr = ...`, empty otherwise
  std::vector<std::string> targets;  // kFor loop variables (1 or 2 for unpacking)
  ExprPtr expr;       // kOutput/kSet/kDo value, kFor iterable
  ExprPtr filter;     // kFor `if` clause
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (condition, body) for if/elif
  Body body;          // kFor/kSetBlock/kMacro/kScope
  Body else_body;     // kIf/kFor else
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro parameters, default or null
};

}  // namespace cohort::tokenizer::jinja
