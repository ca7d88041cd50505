// Jinja interpreter: walks a parsed template with a set of variables and renders text, with
// every resource bounded (output bytes, executed steps, macro call depth) so a hostile or
// broken template errors out instead of hanging or exhausting memory.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/jinja_ast.h"

namespace cohort::tokenizer::jinja {

struct RenderLimits {
  size_t output_bytes_max = 16u << 20;
  int64_t steps_max = 2'000'000;  // statements, loop iterations and calls together
  int call_depth_max = 64;         // nested macro calls
};

class Interpreter {
 public:
  Interpreter(const Body& program, RenderLimits limits);

  // Defines a template-global variable (messages, bos_token, range, ...).
  void SetGlobal(const std::string& name, Value value);
  Result<std::string> Render();

  // Counts one unit of work; fails once the step budget is spent. Builtins that loop over
  // data call this too.
  Status Step(int64_t n = 1);
  size_t output_bytes_max() const { return limits_.output_bytes_max; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Scope = std::map<std::string, Value>;

  Result<Flow> Exec(const Body& body);
  Result<Flow> ExecNode(const Node& node);
  Result<Flow> ExecIf(const Node& node);
  Result<Flow> ExecFor(const Node& node);
  Status ExecSet(const Node& node);
  Status ExecFilterBlock(const Node& node);
  Status RunLoop(const Node& node, const List& items);
  Value MakeMacro(const Node& node);
  Result<Value> CallMacro(const Node& node, const CallArgs& args);
  Result<std::string> Capture(const Body& body);
  Status Emit(const std::string& text);

  Result<Value> Eval(const Expr& expr);
  Result<Value> EvalBinary(const Expr& expr);
  Result<Value> EvalCall(const Expr& expr);
  Result<CallArgs> EvalArgs(const Expr& expr, size_t first);
  Value Lookup(const std::string& name) const;

  const Body& program_;
  RenderLimits limits_;
  std::vector<Scope> scopes_;  // scopes_[0] holds the globals
  std::string out_;
  int64_t steps_ = 0;
  int call_depth_ = 0;
};

}  // namespace cohort::tokenizer::jinja
