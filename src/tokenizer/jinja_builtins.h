// The library the interpreter calls into: operators, subscripts and slices with Python
// semantics, Jinja filters and tests, methods of str/list/dict, and the global functions
// chat templates use (range, namespace, raise_exception, strftime_now).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "tokenizer/jinja_value.h"

namespace cohort::tokenizer::jinja {

class Interpreter;

// `a op b` for the arithmetic, comparison and membership operators.
Result<Value> BinaryOp(Interpreter& interp, const std::string& op, const Value& a, const Value& b);
// Python's `item in container`.
Result<bool> Contains(const Value& container, const Value& item);
// `obj[key]`: a missing key or index is undefined, as in Jinja.
Result<Value> GetItem(const Value& obj, const Value& key);
// `obj[start:stop:step]` on lists and strings; absent parts are undefined.
Result<Value> Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// `obj.name`: dict entries, and str/list/dict methods as bound callables.
Result<Value> GetAttribute(Interpreter& interp, const Value& obj, const std::string& name);

Result<Value> ApplyFilter(Interpreter& interp, const std::string& name, const Value& value,
                          const CallArgs& args);
Result<bool> ApplyTest(const std::string& name, const Value& value, const CallArgs& args);

// Defines range, namespace, dict, raise_exception and strftime_now (which formats `now_unix_s`
// in local time, as llama.cpp does).
void AddGlobalFunctions(Interpreter& interp, int64_t now_unix_s);

// Python's str.strip family on ASCII whitespace or an explicit character set.
std::string StripChars(const std::string& s, const Value& chars, bool left, bool right);

}  // namespace cohort::tokenizer::jinja
