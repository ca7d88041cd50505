// Per-family tool-call text: detection from the template, the forcing grammar, the parse.
// Each parser cuts the text at its family's markers and reads the arguments as JSON; a call
// whose JSON does not parse is left in the content.
#include "server/tool_calls.h"

#include "engine/json_schema_grammar.h"

namespace cohort::server {
namespace {

using nlohmann::json;

bool Contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\n' || s[b] == '\r' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\n' || s[e - 1] == '\r' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

// Arguments as compact JSON text of an object, or false when `args` is none.
bool ArgumentsText(const json& args, std::string& out) {
  if (args.is_object()) {
    out = args.dump();
    return true;
  }
  if (args.is_string()) {  // some models send the arguments as a JSON string
    const json inner = json::parse(args.get<std::string>(), nullptr, false);
    if (inner.is_object()) {
      out = inner.dump();
      return true;
    }
  }
  return false;
}

// The end of the JSON value that starts at `pos` (balanced brackets, strings skipped), or npos.
size_t JsonEnd(std::string_view s, size_t pos) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
      if (depth < 0) return std::string_view::npos;
    }
  }
  return std::string_view::npos;
}

struct Parser {
  AssistantOutput out;
  std::string id_suffix;

  void Add(std::string name, std::string arguments) {
    out.tool_calls.push_back({"call_" + id_suffix + "_" + std::to_string(out.tool_calls.size()), std::move(name),
                              std::move(arguments)});
  }
  // {"name": ..., "arguments" | "parameters": {...}}
  bool AddObject(const json& call) {
    if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) return false;
    std::string args = "{}";
    for (const char* key : {"arguments", "parameters"}) {
      if (call.contains(key) && !ArgumentsText(call[key], args)) return false;
    }
    Add(call["name"].get<std::string>(), args);
    return true;
  }
  bool AddJsonText(std::string_view name, std::string_view text) {
    const json args = json::parse(Trim(text), nullptr, false);
    std::string a;
    if (args.is_discarded() || !ArgumentsText(args, a)) return false;
    Add(Trim(name), a);
    return true;
  }
};

// Text between each `open` and the next `close` (or the end); the text outside goes to
// `rest`. `handle` says whether a segment was a call; one that is not stays in `rest`.
template <typename Handle>
void Segments(std::string_view text, std::string_view open, std::string_view close, std::string& rest, Handle handle) {
  size_t pos = 0;
  while (true) {
    const size_t b = text.find(open, pos);
    if (b == std::string_view::npos) {
      rest.append(text.substr(pos));
      return;
    }
    rest.append(text.substr(pos, b - pos));
    const size_t inner = b + open.size();
    size_t e = text.find(close, inner);
    const size_t end = e == std::string_view::npos ? text.size() : e + close.size();
    if (e == std::string_view::npos) e = text.size();
    if (!handle(text.substr(inner, e - inner))) rest.append(text.substr(b, end - b));
    pos = end;
  }
}

void ParseHermes(Parser& p, std::string_view text, std::string& rest) {
  Segments(text, "<tool_call>", "</tool_call>", rest, [&](std::string_view inner) {
    return p.AddObject(json::parse(Trim(inner), nullptr, false));
  });
}

void ParseGlm(Parser& p, std::string_view text, std::string& rest) {
  Segments(text, "<tool_call>", "</tool_call>", rest, [&](std::string_view inner) {
    const size_t nl = inner.find('<');
    const std::string name = Trim(inner.substr(0, nl));
    if (name.empty()) return false;
    json args = json::object();
    std::string keys_rest;
    Segments(nl == std::string_view::npos ? "" : inner.substr(nl), "<arg_key>", "</arg_value>", keys_rest,
             [&](std::string_view kv) {
               const size_t k_end = kv.find("</arg_key>");
               const size_t v_begin = kv.find("<arg_value>");
               if (k_end == std::string_view::npos || v_begin == std::string_view::npos) return false;
               const std::string value = std::string(kv.substr(v_begin + 11));
               const json parsed = json::parse(value, nullptr, false);
               args[Trim(kv.substr(0, k_end))] = parsed.is_discarded() ? json(value) : parsed;
               return true;
             });
    if (!Trim(keys_rest).empty()) return false;
    p.Add(name, args.dump());
    return true;
  });
}

void ParseLlama3(Parser& p, std::string_view text, std::string& rest) {
  std::string body = Trim(text);
  const bool tagged = body.rfind("<|python_tag|>", 0) == 0;
  if (tagged) body = Trim(std::string_view(body).substr(14));
  // One call, or several separated by ';' (Llama 3.2 lists them so).
  size_t pos = 0;
  std::vector<json> calls;
  while (pos < body.size() && body[pos] == '{') {
    const size_t end = JsonEnd(body, pos);
    if (end == std::string::npos) break;
    calls.push_back(json::parse(body.substr(pos, end - pos), nullptr, false));
    pos = end;
    while (pos < body.size() && (body[pos] == ';' || body[pos] == ' ' || body[pos] == '\n')) ++pos;
  }
  const bool all_calls = !calls.empty() && pos >= body.size() &&
                         std::all_of(calls.begin(), calls.end(), [](const json& c) {
                           return c.is_object() && c.contains("name") && (c.contains("parameters") || c.contains("arguments"));
                         });
  if (!all_calls) {
    rest.append(text);
    return;
  }
  for (const json& c : calls) p.AddObject(c);
}

void ParseMistral(Parser& p, std::string_view text, std::string& rest) {
  const size_t b = text.find("[TOOL_CALLS]");
  if (b == std::string_view::npos) {
    rest.append(text);
    return;
  }
  rest.append(text.substr(0, b));
  std::string_view tail = text.substr(b + 12);
  const std::string trimmed = Trim(tail);
  if (!trimmed.empty() && trimmed[0] == '[') {
    const json calls = json::parse(trimmed, nullptr, false);
    bool ok = calls.is_array() && !calls.empty();
    for (size_t i = 0; ok && i < calls.size(); ++i) ok = p.AddObject(calls[i]);
    if (!ok) rest.append(text.substr(b));
    return;
  }
  // name[ARGS]{...}, repeated, each maybe after another [TOOL_CALLS].
  size_t pos = 0;
  const std::string s(tail);
  while (pos < s.size()) {
    const size_t args = s.find("[ARGS]", pos);
    if (args == std::string::npos) break;
    const size_t end = JsonEnd(s, args + 6);
    if (end == std::string::npos || !p.AddJsonText(s.substr(pos, args - pos), s.substr(args + 6, end - args - 6))) break;
    pos = end;
    if (s.compare(pos, 12, "[TOOL_CALLS]") == 0) pos += 12;
  }
  if (pos < s.size()) rest.append(s.substr(pos));
}

void ParseDeepSeek(Parser& p, std::string_view text, std::string& rest) {
  std::string outside;
  Segments(text, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", outside, [&](std::string_view inner) {
    const std::string_view sep = "<｜tool▁sep｜>";
    const size_t s = inner.find(sep);
    if (s == std::string_view::npos) return false;
    std::string_view left = inner.substr(0, s), right = inner.substr(s + sep.size());
    if (Trim(left) == "function") {  // V3: name, then a ```json block
      const size_t nl = right.find('\n');
      if (nl == std::string_view::npos) return false;
      std::string args(right.substr(nl + 1));
      if (args.rfind("```json", 0) == 0) args = args.substr(7);
      const size_t fence = args.rfind("```");
      if (fence != std::string::npos) args = args.substr(0, fence);
      return p.AddJsonText(right.substr(0, nl), args);
    }
    return p.AddJsonText(left, right);
  });
  for (std::string_view marker : {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"}) {
    for (size_t at; (at = outside.find(marker)) != std::string::npos;) outside.erase(at, marker.size());
  }
  rest.append(outside);
}

void ParseKimi(Parser& p, std::string_view text, std::string& rest) {
  std::string outside;
  Segments(text, "<|tool_call_begin|>", "<|tool_call_end|>", outside, [&](std::string_view inner) {
    const std::string_view arg = "<|tool_call_argument_begin|>";
    const size_t a = inner.find(arg);
    if (a == std::string_view::npos) return false;
    std::string id = Trim(inner.substr(0, a));  // functions.NAME:INDEX
    const size_t dot = id.find('.'), colon = id.rfind(':');
    const std::string name = id.substr(dot == std::string::npos ? 0 : dot + 1,
                                       colon == std::string::npos || colon < dot + 1 ? std::string::npos : colon - dot - 1);
    return p.AddJsonText(name, inner.substr(a + arg.size()));
  });
  for (std::string_view marker : {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"}) {
    for (size_t at; (at = outside.find(marker)) != std::string::npos;) outside.erase(at, marker.size());
  }
  rest.append(outside);
}

void ParseHarmony(Parser& p, std::string_view text, std::string& rest) {
  if (!Contains(text, "<|channel|>")) {
    rest.append(text);
    return;
  }
  size_t pos = 0;
  while ((pos = text.find("<|channel|>", pos)) != std::string_view::npos) {
    const size_t header = pos + 11;
    const size_t msg = text.find("<|message|>", header);
    if (msg == std::string_view::npos) break;
    size_t end = text.size();
    for (std::string_view stop : {"<|end|>", "<|call|>", "<|return|>", "<|start|>", "<|channel|>"}) {
      end = std::min(end, text.find(stop, msg + 11) == std::string_view::npos ? text.size() : text.find(stop, msg + 11));
    }
    const std::string_view head = text.substr(header, msg - header), body = text.substr(msg + 11, end - msg - 11);
    const size_t to = head.find("to=functions.");
    if (head.rfind("analysis", 0) == 0) {
      p.out.reasoning.append(body);
    } else if (to != std::string_view::npos) {
      std::string name(head.substr(to + 13));
      name = name.substr(0, name.find_first_of(" <"));
      if (!p.AddJsonText(name, body)) rest.append(body);
    } else {
      rest.append(body);
    }
    pos = end;
  }
}

}  // namespace

const char* ToolFormatName(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes: return "hermes";
    case ToolFormat::kLlama3: return "llama3";
    case ToolFormat::kMistral: return "mistral";
    case ToolFormat::kDeepSeekV3: return "deepseek-v3";
    case ToolFormat::kDeepSeekV31: return "deepseek-v3.1";
    case ToolFormat::kKimiK2: return "kimi-k2";
    case ToolFormat::kGlm4: return "glm-4";
    case ToolFormat::kHarmony: return "harmony";
  }
  return "?";
}

ToolFormat DetectToolFormat(std::string_view src) {
  if (Contains(src, "<|channel|>")) return ToolFormat::kHarmony;
  if (Contains(src, "<|tool_call_begin|>")) return ToolFormat::kKimiK2;
  if (Contains(src, "<｜tool▁call▁begin｜>")) {
    return Contains(src, "function<｜tool▁sep｜>") || Contains(src, "'function' + '<｜tool▁sep｜>'") ? ToolFormat::kDeepSeekV3
                                                                                             : ToolFormat::kDeepSeekV31;
  }
  if (Contains(src, "<arg_key>")) return ToolFormat::kGlm4;
  if (Contains(src, "[TOOL_CALLS]")) return ToolFormat::kMistral;
  if (Contains(src, "<tool_call>")) return ToolFormat::kHermes;
  if (Contains(src, "<|python_tag|>") || Contains(src, "ipython") || Contains(src, "<|start_header_id|>")) return ToolFormat::kLlama3;
  return ToolFormat::kHermes;
}

AssistantOutput ParseAssistantOutput(ToolFormat format, std::string_view text, const std::string& id_suffix) {
  Parser p;
  p.id_suffix = id_suffix;
  // Reasoning first: <think>...</think>, or text before a lone </think> when the template
  // opened the block in the prompt (Qwen3, DeepSeek-R1).
  std::string body(text);
  const size_t close = body.find("</think>");
  if (close == std::string::npos && Trim(body).rfind("<think>", 0) == 0) {
    // Reasoning that did not end: calls, when it holds them (a forced call skips the
    // reasoning the prompt opened); else reasoning still (the limit came first), not the answer.
    const std::string inner = Trim(body).substr(7);
    AssistantOutput calls = ParseAssistantOutput(format, inner, id_suffix);
    if (!calls.tool_calls.empty()) return calls;
    p.out.reasoning = Trim(inner);
    return std::move(p.out);
  }
  if (close != std::string::npos) {
    std::string head = body.substr(0, close);
    const size_t open = head.find("<think>");
    std::string before = open == std::string::npos ? "" : head.substr(0, open);
    p.out.reasoning = Trim(open == std::string::npos ? head : head.substr(open + 7));
    body = before + body.substr(close + 8);
  }
  std::string rest;
  switch (format) {
    case ToolFormat::kHermes: ParseHermes(p, body, rest); break;
    case ToolFormat::kGlm4: ParseGlm(p, body, rest); break;
    case ToolFormat::kLlama3: ParseLlama3(p, body, rest); break;
    case ToolFormat::kMistral: ParseMistral(p, body, rest); break;
    case ToolFormat::kDeepSeekV3:
    case ToolFormat::kDeepSeekV31: ParseDeepSeek(p, body, rest); break;
    case ToolFormat::kKimiK2: ParseKimi(p, body, rest); break;
    case ToolFormat::kHarmony: ParseHarmony(p, body, rest); break;
  }
  p.out.content = p.out.tool_calls.empty() ? rest : Trim(rest);
  return std::move(p.out);
}

namespace {

// Where the content of `body` stops being final: the first marker of a call or of
// reasoning, else the start of a tail that is a proper prefix of one.
size_t FinalContentEnd(ToolFormat format, std::string_view body) {
  if (format == ToolFormat::kHarmony) return 0;
  if (format == ToolFormat::kLlama3) {
    // A Llama 3 answer is calls only when it starts with one: hold what may still become one.
    const std::string t = Trim(body);
    static constexpr std::string_view kTag = "<|python_tag|>";
    const bool maybe_call = t.empty() || t[0] == '{' || kTag.substr(0, std::min(t.size(), kTag.size())) == std::string_view(t).substr(0, std::min(t.size(), kTag.size()));
    if (maybe_call) return 0;
  }
  std::vector<std::string_view> markers = {"<think>"};
  switch (format) {
    case ToolFormat::kHermes:
    case ToolFormat::kGlm4: markers.push_back("<tool_call>"); break;
    case ToolFormat::kMistral: markers.push_back("[TOOL_CALLS]"); break;
    case ToolFormat::kDeepSeekV3:
    case ToolFormat::kDeepSeekV31: markers.insert(markers.end(), {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"}); break;
    case ToolFormat::kKimiK2: markers.insert(markers.end(), {"<|tool_calls_section_begin|>", "<|tool_call_begin|>"}); break;
    case ToolFormat::kLlama3:
    case ToolFormat::kHarmony: break;
  }
  size_t end = body.size();
  for (std::string_view m : markers) end = std::min(end, body.find(m));
  if (end < body.size()) return end;
  // A tail that may be the start of a marker waits for the next piece.
  for (std::string_view m : markers) {
    for (size_t n = std::min(m.size() - 1, body.size()); n > 0; --n) {
      if (body.substr(body.size() - n) == m.substr(0, n)) {
        end = std::min(end, body.size() - n);
        break;
      }
    }
  }
  return end;
}

// The part of `final_text` past `sent` (both without leading whitespace); nothing when what
// went out already covers it.
std::string Unsent(const std::string& final_text, const std::string& sent) {
  if (final_text.compare(0, sent.size(), sent) == 0) return final_text.substr(sent.size());
  return "";
}

}  // namespace

ToolTextStream::Delta ToolTextStream::Append(std::string_view piece) {
  text_.append(piece);
  Delta d;
  std::string_view body = text_;
  // Reasoning: inside <think> until </think>.
  const size_t lead = body.find_first_not_of(" \n\r\t");
  const bool opened = lead != std::string_view::npos && body.substr(lead).rfind("<think>", 0) == 0;
  if (opens_think_ || opened) {
    std::string_view inside = opened ? body.substr(lead + 7) : body;
    const size_t close = inside.find("</think>");
    std::string_view reasoning = close == std::string_view::npos ? inside : inside.substr(0, close);
    // A call may come instead of reasoning (a forced call): reasoning stops where one may start.
    if (close == std::string_view::npos) reasoning = reasoning.substr(0, FinalContentEnd(format_, reasoning));
    if (close == std::string_view::npos) {  // hold a tail that may begin "</think>"
      static constexpr std::string_view kClose = "</think>";
      for (size_t n = std::min(kClose.size() - 1, reasoning.size()); n > 0; --n) {
        if (reasoning.substr(reasoning.size() - n) == kClose.substr(0, n)) {
          reasoning = reasoning.substr(0, reasoning.size() - n);
          break;
        }
      }
    }
    const size_t r = reasoning.find_first_not_of(" \n\r\t");
    if (r != std::string_view::npos) {
      // Trailing whitespace waits: the whole parse trims it.
      std::string_view kept = reasoning.substr(r);
      kept = kept.substr(0, kept.find_last_not_of(" \n\r\t") + 1);
      if (kept.size() > reasoning_sent_) {
        d.reasoning = std::string(kept.substr(reasoning_sent_));
        reasoning_sent_ = kept.size();
        reasoning_out_ += d.reasoning;
      }
    }
    if (close == std::string_view::npos) return d;
    body = inside.substr(close + 8);
  }
  const size_t c = body.find_first_not_of(" \n\r\t");
  if (c == std::string_view::npos) return d;
  body = body.substr(c);
  size_t end = FinalContentEnd(format_, body);
  // Trailing whitespace waits too: before a call, the whole parse trims it.
  while (end > 0 && (body[end - 1] == ' ' || body[end - 1] == '\n' || body[end - 1] == '\r' || body[end - 1] == '\t')) --end;
  if (end > content_sent_) {
    d.content = std::string(body.substr(content_sent_, end - content_sent_));
    content_sent_ = end;
    content_out_ += d.content;
  }
  return d;
}

ToolTextStream::Delta ToolTextStream::Finish(const AssistantOutput& whole) {
  Delta d;
  d.reasoning = Unsent(whole.reasoning, reasoning_out_);
  const size_t c = whole.content.find_first_not_of(" \n\r\t");
  d.content = Unsent(c == std::string::npos ? std::string() : whole.content.substr(c), content_out_);
  return d;
}

Result<std::string> ForcedToolCallGrammar(ToolFormat format, const json& tools, const std::string& only_name) {
  engine::JsonSchemaGrammar schemas(/*strict=*/false);
  std::string calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& fn = tools[i]["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!only_name.empty() && name != only_name) continue;
    const json params = fn.contains("parameters") ? fn["parameters"] : json{{"type", "object"}};
    const std::string where = "tools[" + std::to_string(i) + "].function.parameters";
    const std::string lit = engine::GbnfLiteral(name);
    const std::string json_name = engine::GbnfLiteral(json(name).dump());
    std::string call;
    if (format == ToolFormat::kGlm4) {
      // One <arg_key>/<arg_value> pair per required property, each value as JSON.
      call = lit + " \"\\n\"";
      if (params.contains("required") && params["required"].is_array() && params.contains("properties")) {
        for (const json& key : params["required"]) {
          if (!key.is_string() || !params["properties"].contains(key.get<std::string>())) continue;
          COHORT_ASSIGN_OR_RETURN(std::string value, schemas.Add(params["properties"][key.get<std::string>()], where));
          std::string pair = "<arg_key>";
          pair.append(key.get<std::string>()).append("</arg_key>\n<arg_value>");
          call.append(" ").append(engine::GbnfLiteral(pair)).append(" ").append(value).append(" \"</arg_value>\\n\"");
        }
      }
    } else {
      COHORT_ASSIGN_OR_RETURN(std::string args, schemas.Add(params, where));
      switch (format) {
        case ToolFormat::kHermes: call = "\"{\\\"name\\\": \" " + json_name + " \", \\\"arguments\\\": \" " + args + " \"}\""; break;
        case ToolFormat::kLlama3: call = "\"{\\\"name\\\": \" " + json_name + " \", \\\"parameters\\\": \" " + args + " \"}\""; break;
        case ToolFormat::kMistral: call = "\"[{\\\"name\\\": \" " + json_name + " \", \\\"arguments\\\": \" " + args + " \"}]\""; break;
        case ToolFormat::kDeepSeekV3: call = lit + " \"\\n```json\\n\" " + args + " \"\\n```\""; break;
        case ToolFormat::kDeepSeekV31: call = lit + " \"<｜tool▁sep｜>\" " + args; break;
        case ToolFormat::kKimiK2: call = lit + " \":0<|tool_call_argument_begin|>\" " + args; break;
        case ToolFormat::kHarmony: call = lit + " \" <|constrain|>json<|message|>\" " + args; break;
        case ToolFormat::kGlm4: break;
      }
    }
    calls += (calls.empty() ? "(" : " | ") + call;
  }
  if (calls.empty()) return InvalidArgument("tool_choice: names a function that is not in tools");
  calls += ")";
  std::string root;
  switch (format) {
    case ToolFormat::kHermes: root = "\"<tool_call>\\n\" " + calls + " \"\\n</tool_call>\""; break;
    case ToolFormat::kGlm4: root = "\"<tool_call>\" " + calls + " \"</tool_call>\""; break;
    case ToolFormat::kLlama3: root = calls; break;
    case ToolFormat::kMistral: root = "\"[TOOL_CALLS]\" " + calls; break;
    case ToolFormat::kDeepSeekV3:
      root = "\"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>\" " + calls + " \"<｜tool▁call▁end｜><｜tool▁calls▁end｜>\"";
      break;
    case ToolFormat::kDeepSeekV31:
      root = "\"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>\" " + calls + " \"<｜tool▁call▁end｜><｜tool▁calls▁end｜>\"";
      break;
    case ToolFormat::kKimiK2:
      root = "\"<|tool_calls_section_begin|><|tool_call_begin|>functions.\" " + calls + " \"<|tool_call_end|><|tool_calls_section_end|>\"";
      break;
    case ToolFormat::kHarmony: root = "\"<|channel|>commentary to=functions.\" " + calls; break;
  }
  return "root ::= " + root + "\n" + schemas.Rules();
}

}  // namespace cohort::server
