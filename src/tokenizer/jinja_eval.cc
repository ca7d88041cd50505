// Expression evaluation of the Jinja interpreter (names, literals, operators, calls, filters).
#include <string>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interpreter.h"

namespace cohort::tokenizer::jinja {

Result<Value> Interpreter::Eval(const Expr& expr) {
  switch (expr.kind) {
    case ExprKind::kLiteral: return expr.literal;
    case ExprKind::kName: return Lookup(expr.name);
    case ExprKind::kList: {
      List items;
      for (const ExprPtr& child : expr.children) {
        COHORT_ASSIGN_OR_RETURN(Value item, Eval(*child));
        items.push_back(std::move(item));
      }
      return Value::MakeList(std::move(items));
    }
    case ExprKind::kDict: {
      Value dict = Value::MakeDict();
      for (size_t k = 0; k + 1 < expr.children.size(); k += 2) {
        COHORT_ASSIGN_OR_RETURN(Value key, Eval(*expr.children[k]));
        COHORT_ASSIGN_OR_RETURN(Value value, Eval(*expr.children[k + 1]));
        // Keys are stored as strings; numeric keys (a lookup table keyed by ints) go by their
        // decimal text, which GetItem uses for numeric subscripts too.
        if (!key.IsString() && !key.IsNumber()) {
          return Unsupported("dict keys must be strings or numbers, got a " + std::string(KindName(key.kind)));
        }
        dict.dict->SetTyped(key, std::move(value));
      }
      return dict;
    }
    case ExprKind::kAttr: {
      COHORT_ASSIGN_OR_RETURN(Value obj, Eval(*expr.children[0]));
      return GetAttribute(*this, obj, expr.name);
    }
    case ExprKind::kIndex: {
      COHORT_ASSIGN_OR_RETURN(Value obj, Eval(*expr.children[0]));
      COHORT_ASSIGN_OR_RETURN(Value key, Eval(*expr.children[1]));
      return GetItem(obj, key);
    }
    case ExprKind::kSlice: {
      COHORT_ASSIGN_OR_RETURN(Value obj, Eval(*expr.children[0]));
      Value parts[3];
      for (int k = 0; k < 3; ++k) {
        if (expr.children[k + 1]) {
          COHORT_ASSIGN_OR_RETURN(parts[k], Eval(*expr.children[k + 1]));
        }
      }
      return Slice(obj, parts[0], parts[1], parts[2]);
    }
    case ExprKind::kCall: return EvalCall(expr);
    case ExprKind::kFilter: {
      COHORT_ASSIGN_OR_RETURN(Value input, Eval(*expr.children[0]));
      COHORT_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1));
      return ApplyFilter(*this, expr.name, input, args);
    }
    case ExprKind::kTest: {
      COHORT_ASSIGN_OR_RETURN(Value input, Eval(*expr.children[0]));
      COHORT_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1));
      COHORT_ASSIGN_OR_RETURN(bool result, ApplyTest(expr.name, input, args));
      return Value::Bool(result != expr.negated);
    }
    case ExprKind::kUnary: {
      COHORT_ASSIGN_OR_RETURN(Value operand, Eval(*expr.children[0]));
      if (expr.name == "not") return Value::Bool(!Truthy(operand));
      if (operand.kind == Kind::kInt) return Value::Int(expr.name == "-" ? -operand.i : operand.i);
      if (operand.IsNumber()) return Value::Float(expr.name == "-" ? -operand.AsDouble() : operand.AsDouble());
      return InvalidArgument("bad operand type for unary " + expr.name + ": " + KindName(operand.kind));
    }
    case ExprKind::kBinary: return EvalBinary(expr);
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      // Python semantics: the result is one of the operands, not a bool.
      COHORT_ASSIGN_OR_RETURN(Value left, Eval(*expr.children[0]));
      bool take_left = (expr.kind == ExprKind::kAnd) ? !Truthy(left) : Truthy(left);
      if (take_left) return left;
      return Eval(*expr.children[1]);
    }
    case ExprKind::kTernary: {
      COHORT_ASSIGN_OR_RETURN(Value cond, Eval(*expr.children[1]));
      if (Truthy(cond)) return Eval(*expr.children[0]);
      if (!expr.children[2]) return Value::Undefined();
      return Eval(*expr.children[2]);
    }
  }
  return Internal("unknown expression kind");
}

Result<Value> Interpreter::EvalBinary(const Expr& expr) {
  COHORT_ASSIGN_OR_RETURN(Value left, Eval(*expr.children[0]));
  COHORT_ASSIGN_OR_RETURN(Value right, Eval(*expr.children[1]));
  return BinaryOp(*this, expr.name, left, right);
}

Result<CallArgs> Interpreter::EvalArgs(const Expr& expr, size_t first) {
  CallArgs args;
  for (size_t k = first; k < expr.children.size(); ++k) {
    COHORT_ASSIGN_OR_RETURN(Value value, Eval(*expr.children[k]));
    args.positional.push_back(std::move(value));
  }
  for (const auto& [name, value_expr] : expr.kwargs) {
    COHORT_ASSIGN_OR_RETURN(Value value, Eval(*value_expr));
    args.keyword.emplace_back(name, std::move(value));
  }
  return args;
}

Result<Value> Interpreter::EvalCall(const Expr& expr) {
  COHORT_ASSIGN_OR_RETURN(Value callee, Eval(*expr.children[0]));
  if (!callee.IsCallable()) {
    const Expr& target = *expr.children[0];
    std::string what = target.kind == ExprKind::kName ? "'" + target.name + "'"
                       : target.kind == ExprKind::kAttr ? "method '" + target.name + "'"
                                                          : "expression";
    if (callee.IsUndefined()) return Unsupported(what + " is undefined (not a supported function or method)");
    return InvalidArgument(what + " is a " + KindName(callee.kind) + ", not callable");
  }
  COHORT_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1));
  COHORT_RETURN_IF_ERROR(Step());
  return (*callee.fn)(args);
}

}  // namespace cohort::tokenizer::jinja
