// Jinja interpreter: statements (output, if, for, set, macro) and expression evaluation.
#include "tokenizer/jinja_interpreter.h"

#include "tokenizer/jinja_builtins.h"

namespace cohort::tokenizer::jinja {
namespace {

Status At(int line, const Status& status) {
  if (status.ok() || status.message().rfind("line ", 0) == 0) return status;
  return status.Annotate("line " + std::to_string(line));
}

}  // namespace

Interpreter::Interpreter(const Body& program, RenderLimits limits)
    : program_(program), limits_(limits), scopes_(1) {}

void Interpreter::SetGlobal(const std::string& name, Value value) { scopes_[0][name] = std::move(value); }

Result<std::string> Interpreter::Render() {
  out_.clear();
  COHORT_ASSIGN_OR_RETURN(Flow flow, Exec(program_));
  if (flow != Flow::kNormal) return Unsupported("'break' or 'continue' outside a for loop");
  return std::move(out_);
}

Status Interpreter::Step(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.steps_max) {
    return OutOfRange("template exceeded " + std::to_string(limits_.steps_max) +
                      " steps (an unbounded loop?)");
  }
  return Status::Ok();
}

Status Interpreter::Emit(const std::string& text) {
  if (out_.size() + text.size() > limits_.output_bytes_max) {
    return OutOfRange("template output exceeds " + std::to_string(limits_.output_bytes_max) + " bytes");
  }
  out_ += text;
  return Status::Ok();
}

Value Interpreter::Lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end()) return found->second;
  }
  return Value::Undefined(name);
}

Result<Interpreter::Flow> Interpreter::Exec(const Body& body) {
  for (const NodePtr& node : body) {
    COHORT_ASSIGN_OR_RETURN(Flow flow, ExecNode(*node));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Result<Interpreter::Flow> Interpreter::ExecNode(const Node& node) {
  COHORT_RETURN_IF_ERROR(Step());
  switch (node.kind) {
    case NodeKind::kText: COHORT_RETURN_IF_ERROR(Emit(node.text)); break;
    case NodeKind::kOutput: {
      auto value = Eval(*node.expr);
      if (!value.ok()) return At(node.line, value.status());
      COHORT_RETURN_IF_ERROR(Emit(ToStr(*value)));
      break;
    }
    case NodeKind::kIf: return ExecIf(node);
    case NodeKind::kFor: return ExecFor(node);
    case NodeKind::kSet:
    case NodeKind::kSetBlock: COHORT_RETURN_IF_ERROR(At(node.line, ExecSet(node))); break;
    case NodeKind::kMacro: scopes_.back()[node.text] = MakeMacro(node); break;
    case NodeKind::kBreak: return Flow::kBreak;
    case NodeKind::kContinue: return Flow::kContinue;
    case NodeKind::kDo: {
      auto value = Eval(*node.expr);
      if (!value.ok()) return At(node.line, value.status());
      break;
    }
    case NodeKind::kScope: return Exec(node.body);
    case NodeKind::kFilterBlock: COHORT_RETURN_IF_ERROR(At(node.line, ExecFilterBlock(node))); break;
  }
  return Flow::kNormal;
}

Result<Interpreter::Flow> Interpreter::ExecIf(const Node& node) {
  for (const auto& [cond, body] : node.branches) {
    auto value = Eval(*cond);
    if (!value.ok()) return At(cond->line, value.status());
    if (Truthy(*value)) return Exec(body);
  }
  return Exec(node.else_body);
}

Status Interpreter::ExecSet(const Node& node) {
  Value value;
  if (node.kind == NodeKind::kSetBlock) {
    COHORT_ASSIGN_OR_RETURN(std::string text, Capture(node.body));
    value = Value::Str(std::move(text));
  } else {
    COHORT_ASSIGN_OR_RETURN(value, Eval(*node.expr));
  }
  if (node.attr.empty()) {
    scopes_.back()[node.text] = std::move(value);
    return Status::Ok();
  }
  Value target = Lookup(node.text);
  if (!target.IsDict()) {
    return InvalidArgument("cannot set attribute '" + node.attr + "' on '" + node.text + "' (a " +
                           KindName(target.kind) + ", not a namespace)");
  }
  if (WouldCycle(value, target.dict.get())) {
    return InvalidArgument("setting '" + node.text + "." + node.attr + "' would make it contain itself or nest too deeply");
  }
  target.dict->Set(node.attr, std::move(value));
  return Status::Ok();
}

Status Interpreter::ExecFilterBlock(const Node& node) {
  COHORT_ASSIGN_OR_RETURN(std::string text, Capture(node.body));
  COHORT_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(*node.expr, 1));
  COHORT_ASSIGN_OR_RETURN(Value filtered, ApplyFilter(*this, node.expr->name, Value::Str(std::move(text)), args));
  return Emit(ToStr(filtered));
}

Result<Interpreter::Flow> Interpreter::ExecFor(const Node& node) {
  auto iterable = Eval(*node.expr);
  if (!iterable.ok()) return At(node.line, iterable.status());
  List items;
  const Value& v = *iterable;
  if (v.IsList()) {
    items = *v.list;
  } else if (v.IsDict()) {
    for (const auto& [key, value] : v.dict->items) items.push_back(v.dict->KeyValue(key));
  } else if (v.IsString()) {
    std::vector<size_t> offsets = Utf8Offsets(v.s);
    for (size_t k = 0; k + 1 < offsets.size(); ++k) {
      items.push_back(Value::Str(v.s.substr(offsets[k], offsets[k + 1] - offsets[k])));
    }
  } else if (!v.IsUndefined()) {
    return Unsupported("line " + std::to_string(node.line) + ": cannot iterate over a " + KindName(v.kind));
  }
  scopes_.emplace_back();
  Status status = RunLoop(node, items);
  scopes_.pop_back();
  COHORT_RETURN_IF_ERROR(At(node.line, status));
  return Flow::kNormal;
}

Status Interpreter::RunLoop(const Node& node, const List& all_items) {
  auto bind = [&](const Value& item) -> Status {
    if (node.targets.size() == 1) {
      scopes_.back()[node.targets[0]] = item;
      return Status::Ok();
    }
    if (!item.IsList() || item.list->size() != node.targets.size()) {
      return InvalidArgument("cannot unpack a " + std::string(KindName(item.kind)) + " into " +
                             std::to_string(node.targets.size()) + " loop variables");
    }
    for (size_t k = 0; k < node.targets.size(); ++k) scopes_.back()[node.targets[k]] = (*item.list)[k];
    return Status::Ok();
  };
  List items;
  for (const Value& item : all_items) {
    COHORT_RETURN_IF_ERROR(Step());
    if (node.filter) {
      COHORT_RETURN_IF_ERROR(bind(item));
      COHORT_ASSIGN_OR_RETURN(Value keep, Eval(*node.filter));
      if (!Truthy(keep)) continue;
    }
    items.push_back(item);
  }
  if (items.empty()) {
    COHORT_ASSIGN_OR_RETURN(Flow flow, Exec(node.else_body));
    (void)flow;
    return Status::Ok();
  }
  const auto length = static_cast<int64_t>(items.size());
  // One loop object per loop, updated in place: allocating it per iteration dominated the
  // cost of long loops.
  Value loop = Value::MakeDict();
  loop.dict->Set("length", Value::Int(length));
  for (int64_t k = 0; k < length; ++k) {
    COHORT_RETURN_IF_ERROR(Step());
    COHORT_RETURN_IF_ERROR(bind(items[k]));
    loop.dict->Set("index", Value::Int(k + 1));
    loop.dict->Set("index0", Value::Int(k));
    loop.dict->Set("revindex", Value::Int(length - k));
    loop.dict->Set("revindex0", Value::Int(length - k - 1));
    loop.dict->Set("first", Value::Bool(k == 0));
    loop.dict->Set("last", Value::Bool(k == length - 1));
    loop.dict->Set("previtem", k > 0 ? items[k - 1] : Value::Undefined("previtem"));
    loop.dict->Set("nextitem", k + 1 < length ? items[k + 1] : Value::Undefined("nextitem"));
    scopes_.back()["loop"] = loop;
    COHORT_ASSIGN_OR_RETURN(Flow flow, Exec(node.body));
    if (flow == Flow::kBreak) break;
  }
  return Status::Ok();
}

Result<std::string> Interpreter::Capture(const Body& body) {
  std::string saved = std::move(out_);
  out_.clear();
  auto flow = Exec(body);
  std::string captured = std::move(out_);
  out_ = std::move(saved);
  if (!flow.ok()) return flow.status();
  return captured;
}

Value Interpreter::MakeMacro(const Node& node) {
  const Node* macro = &node;
  // The interpreter outlives every value it creates (they die with the render), so the raw
  // back-pointer is safe.
  return Value::Function([this, macro](const CallArgs& args) { return CallMacro(*macro, args); });
}

Result<Value> Interpreter::CallMacro(const Node& node, const CallArgs& args) {
  if (call_depth_ >= limits_.call_depth_max) {
    return OutOfRange("macro '" + node.text + "' nested deeper than " + std::to_string(limits_.call_depth_max));
  }
  if (args.positional.size() > node.params.size()) {
    return InvalidArgument("macro '" + node.text + "' takes " + std::to_string(node.params.size()) +
                           " arguments, got " + std::to_string(args.positional.size()));
  }
  Scope frame;
  for (size_t k = 0; k < node.params.size(); ++k) {
    const auto& [name, default_expr] = node.params[k];
    Value value = args.Get(k, name);
    if (value.IsUndefined() && default_expr) {
      COHORT_ASSIGN_OR_RETURN(value, Eval(*default_expr));
    }
    frame[name] = value;
  }
  // A macro sees the template globals and its own arguments, not its caller's locals.
  std::vector<Scope> saved;
  saved.swap(scopes_);
  scopes_.push_back(saved[0]);
  scopes_.push_back(std::move(frame));
  ++call_depth_;
  auto text = Capture(node.body);
  --call_depth_;
  saved[0] = std::move(scopes_[0]);
  scopes_.swap(saved);
  if (!text.ok()) return text.status();
  return Value::Str(std::move(*text));
}

}  // namespace cohort::tokenizer::jinja
