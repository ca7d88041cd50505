// BuildVocab: llama.cpp's vocabulary loading rules (defaults per model type, special-token
// ids, the control-token promotions and end-of-generation set it derives from token texts).
#include "tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace cohort::tokenizer {
namespace {

uint32_t AttrFromType(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::kUnknown: return attr::kUnknown;
    case TokenType::kUnused: return attr::kUnused;
    case TokenType::kNormal: return attr::kNormal;
    case TokenType::kControl: return attr::kControl;
    case TokenType::kUserDefined: return attr::kUserDefined;
    case TokenType::kByte: return attr::kByte;
    case TokenType::kUndefined: break;
  }
  return attr::kUndefined;
}

bool OneOf(const std::string& text, std::initializer_list<std::string_view> list) {
  for (std::string_view s : list) {
    if (text == s) return true;
  }
  return false;
}

// Token texts llama.cpp recognises as the various special roles when the metadata omits them.
// Among several candidates the earliest text in the list wins (llama.cpp's choice follows
// hash-map order, which is unspecified; list order gives what it reports for Llama 3 and Qwen:
// <|eot_id|> over <|end_of_text|>, <|im_end|> over <|endoftext|>).
void DetectSpecialsByText(Vocab& v) {
  struct Role {
    int32_t* id;
    std::initializer_list<std::string_view> texts;
  };
  const std::array<Role, 8> roles = {{
      {&v.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
                "<end_of_utterance>"}},
      {&v.eom, {"<|eom_id|>"}},
      {&v.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
                    "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}},
      {&v.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
                    "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}},
      {&v.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
                    "▁<MID>", "<|code_middle|>", "<|middle|>"}},
      {&v.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
      {&v.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
      {&v.fim_sep, {"<|file_sep|>"}},
  }};
  for (const Role& role : roles) {
    if (*role.id != -1) continue;
    for (std::string_view text : role.texts) {
      const int32_t id = v.Lookup(text);
      if (id < 0) continue;
      *role.id = id;
      v.attrs[id] |= attr::kControl;
      break;
    }
  }
  // Control tokens named "...unused..." are unused.
  for (int32_t id = 0; id < v.n(); ++id) {
    if ((v.attrs[id] & attr::kControl) && v.texts[id].find("unused") != std::string::npos) {
      v.attrs[id] |= attr::kUnused;
    }
  }
}

void BuildEndOfGeneration(Vocab& v) {
  for (int32_t id : {v.fim_pad, v.fim_rep, v.fim_sep}) {
    if (id != -1) v.eog.insert(id);
  }
  for (int32_t id = 0; id < v.n(); ++id) {
    if (v.text_to_id.at(v.texts[id]) != id) continue;
    if (OneOf(v.texts[id], {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                            "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>",
                            "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                            "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
                            "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["})) {
      v.eog.insert(id);
      v.attrs[id] |= attr::kControl;
    }
  }
  // gpt-oss: these always render.
  for (int32_t id = 0; id < v.n(); ++id) {
    if (OneOf(v.texts[id], {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})) {
      v.attrs[id] = attr::kUserDefined;
    }
  }
  for (int32_t id : {v.eos, v.eot, v.eom}) {
    if (id != -1) v.eog.insert(id);
  }
  // o200k_harmony / solar-open: "<|end|>" is not end-of-generation there.
  bool has_return = false, has_call = false, has_flush = false;
  int32_t end_id = -1, s_id = -1;
  bool has_tool_response = false;
  for (int32_t id : v.eog) {
    const std::string& t = v.texts[id];
    if (t == "<|return|>") has_return = true;
    if (t == "<|call|>" || t == "<|calls|>") has_call = true;
    if (t == "<|flush|>") has_flush = true;
    if (t == "<|end|>") end_id = id;
    if (t == "<|tool_response>") has_tool_response = true;
    if (t == "</s>") s_id = id;
  }
  if (end_id != -1 && ((has_return && has_call) || (has_call && has_flush))) {
    v.eog.erase(end_id);
    v.attrs[end_id] = attr::kUserDefined;
  }
  if (has_tool_response && s_id != -1) {
    v.eog.erase(s_id);
    v.attrs[s_id] = attr::kNormal;
  }
}

void ApplyModelQuirks(Vocab& v, const VocabData& data) {
  std::string name = data.general_name;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto set = [&](std::string_view text, uint32_t bit, bool on) {
    const int32_t id = v.Lookup(text);
    if (id < 0) return;
    v.attrs[id] = on ? (v.attrs[id] | bit) : (v.attrs[id] & ~bit);
  };
  const bool jina = data.pre.find("jina-v2-de") != std::string::npos ||
                    data.pre.find("jina-v2-es") != std::string::npos ||
                    data.pre.find("jina-v2-code") != std::string::npos;
  if (jina) {
    set("<mask>", attr::kLstrip, true);
  } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : v.special_tokens) v.attrs[id] |= attr::kRstrip;
    set("</s>", attr::kRstrip, true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, attr::kRstrip, false);
  } else if (name.find("modern-bert") != std::string::npos) {
    set("[MASK]", attr::kLstrip, true);
  }
}

Status LoadTokens(Vocab& v, VocabData& data) {
  const size_t n = data.tokens.size();
  if (n == 0) return Corrupt("tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) return Corrupt("tokenizer.ggml.tokens is too long");
  if (!data.scores.empty() && data.scores.size() < n) {
    return Corrupt("tokenizer.ggml.scores has fewer entries than tokens");
  }
  if (!data.types.empty() && data.types.size() < n) {
    return Corrupt("tokenizer.ggml.token_type has fewer entries than tokens");
  }
  v.texts = std::move(data.tokens);
  v.scores.assign(n, 0.0f);
  v.types.assign(n, TokenType::kNormal);
  v.attrs.assign(n, attr::kNormal);
  v.text_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (v.texts[i].empty()) v.texts[i] = "[EMPTY_" + std::to_string(i) + "]";
    v.text_to_id[v.texts[i]] = static_cast<int32_t>(i);
    if (!data.scores.empty()) v.scores[i] = data.scores[i];
    if (!data.types.empty()) {
      const int32_t t = data.types[i];
      v.types[i] = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::kUndefined;
      v.attrs[i] = AttrFromType(t);
    }
  }
  return Status::Ok();
}

void LoadMerges(Vocab& v, const std::vector<std::string>& merges) {
  v.bpe_ranks.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t pos = m.find(' ', 1);
    std::string first, second;
    if (pos != std::string::npos) {
      first = m.substr(0, pos);
      second = m.substr(pos + 1);
    }
    v.bpe_ranks.emplace(std::make_pair(std::move(first), std::move(second)),
                        static_cast<int32_t>(i));  // a repeated pair keeps its first rank
  }
}

void ApplySpecialIds(Vocab& v, const VocabData& d) {
  const std::array<std::pair<int32_t*, const std::optional<uint64_t>*>, 14> ids = {{
      {&v.bos, &d.bos_id}, {&v.eos, &d.eos_id}, {&v.eot, &d.eot_id}, {&v.eom, &d.eom_id},
      {&v.unk, &d.unk_id}, {&v.sep, &d.sep_id}, {&v.pad, &d.pad_id}, {&v.mask, &d.mask_id},
      {&v.fim_pre, &d.fim_pre_id}, {&v.fim_suf, &d.fim_suf_id}, {&v.fim_mid, &d.fim_mid_id},
      {&v.fim_pad, &d.fim_pad_id}, {&v.fim_rep, &d.fim_rep_id}, {&v.fim_sep, &d.fim_sep_id},
  }};
  for (const auto& [id, value] : ids) {
    if (*id >= v.n()) *id = -1;  // a default that does not exist in this vocab
    if (value->has_value() && **value < static_cast<uint64_t>(v.n())) {
      *id = static_cast<int32_t>(**value);
    }
  }
}

}  // namespace

int32_t Vocab::HexByteToken(uint8_t byte) const {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char name[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
  return Lookup(std::string_view(name, 6));
}

int32_t Vocab::SpmByteToken(uint8_t byte) const {
  const int32_t id = HexByteToken(byte);
  if (id >= 0) return id;
  const char raw = static_cast<char>(byte);
  return Lookup(std::string_view(&raw, 1));
}

Result<Vocab> BuildVocab(VocabData data, const PreTokenizerSpec& spec) {
  Vocab v;
  if (data.model == "llama") {
    v.kind = VocabKind::kSpm;
    v.bos = 1;
    v.eos = 2;
    v.unk = 0;
    v.add_space_prefix = true;
    v.add_bos = true;
  } else if (data.model == "gpt2" || data.model == "gemma4") {
    v.kind = VocabKind::kBpe;
    if (data.merges.empty()) return Corrupt("BPE vocabulary without tokenizer.ggml.merges");
    LoadMerges(v, data.merges);
    const bool gemma4 = data.model == "gemma4";  // its special ids come only from metadata
    v.bos = (spec.bos_none || gemma4) ? -1 : 11;
    v.eos = gemma4 ? -1 : 11;
    v.clean_spaces = spec.clean_spaces;
    v.ignore_merges = spec.ignore_merges;
    v.add_bos = spec.add_bos;
    v.byte_encode = !spec.spm_style;
    v.escape_whitespace = spec.spm_style;
  } else {
    return Unsupported("tokenizer.ggml.model '" + data.model + "' is not supported");
  }
  if (data.add_space_prefix) v.add_space_prefix = *data.add_space_prefix;
  COHORT_RETURN_IF_ERROR(LoadTokens(v, data));
  ApplySpecialIds(v, data);
  if (data.add_bos) v.add_bos = *data.add_bos;
  if (data.add_eos) v.add_eos = *data.add_eos;
  if (spec.spm_style) v.add_bos = true;  // llama.cpp's Gemma 4 override

  DetectSpecialsByText(v);
  BuildEndOfGeneration(v);

  for (int32_t id = 0; id < v.n(); ++id) {
    if (v.attrs[id] & (attr::kControl | attr::kUserDefined | attr::kUnknown)) {
      v.special_tokens.push_back(id);
    }
  }
  std::stable_sort(v.special_tokens.begin(), v.special_tokens.end(), [&](int32_t a, int32_t b) {
    return v.texts[a].size() > v.texts[b].size();
  });
  ApplyModelQuirks(v, data);
  return v;
}

}  // namespace cohort::tokenizer
