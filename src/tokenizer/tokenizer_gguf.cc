// Reads the tokenizer.* metadata of a GGUF into VocabData (the GGUF-facing half of loading).
#include <utility>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace cohort::tokenizer {
namespace {

const gguf::Array* FindArray(const gguf::File& file, std::string_view key) {
  const gguf::Value* value = file.Find(key);
  if (value == nullptr || value->type != gguf::ValueType::kArray) return nullptr;
  return &std::get<gguf::Array>(value->data);
}

Result<std::vector<std::string>> ReadStrings(const gguf::File& file, std::string_view key,
                                             bool required) {
  const gguf::Value* value = file.Find(key);
  if (value == nullptr) {
    if (required) return NotFound("missing " + std::string(key));
    return std::vector<std::string>{};
  }
  const gguf::Array* array = FindArray(file, key);
  if (array == nullptr || array->element_type != gguf::ValueType::kString) {
    return Corrupt(std::string(key) + " is not an array of strings");
  }
  std::vector<std::string> out;
  out.reserve(array->items.size());
  for (const gguf::Value& item : array->items) out.push_back(std::get<std::string>(item.data));
  return out;
}

Result<std::vector<float>> ReadScores(const gguf::File& file) {
  constexpr std::string_view kKey = "tokenizer.ggml.scores";
  if (file.Find(kKey) == nullptr) return std::vector<float>{};
  const gguf::Array* array = FindArray(file, kKey);
  if (array == nullptr || (array->element_type != gguf::ValueType::kFloat32 &&
                           array->element_type != gguf::ValueType::kInt32)) {
    return Corrupt("tokenizer.ggml.scores is not an array of f32 or i32");
  }
  std::vector<float> out;
  out.reserve(array->items.size());
  for (const gguf::Value& item : array->items) {
    if (item.is_float()) {
      out.push_back(static_cast<float>(std::get<double>(item.data)));
    } else {
      out.push_back(static_cast<float>(std::get<int64_t>(item.data)));
    }
  }
  return out;
}

Result<std::vector<int32_t>> ReadTypes(const gguf::File& file) {
  constexpr std::string_view kKey = "tokenizer.ggml.token_type";
  if (file.Find(kKey) == nullptr) return std::vector<int32_t>{};
  const gguf::Array* array = FindArray(file, kKey);
  if (array == nullptr || array->element_type != gguf::ValueType::kInt32) {
    return Corrupt("tokenizer.ggml.token_type is not an array of i32");
  }
  std::vector<int32_t> out;
  out.reserve(array->items.size());
  for (const gguf::Value& item : array->items) {
    out.push_back(static_cast<int32_t>(std::get<int64_t>(item.data)));
  }
  return out;
}

Status ReadId(const gguf::File& file, std::string_view key, std::optional<uint64_t>& id) {
  if (file.Find(key) == nullptr) return Status::Ok();
  COHORT_ASSIGN_OR_RETURN(id, file.GetUint(key));
  return Status::Ok();
}

Status ReadFlag(const gguf::File& file, std::string_view key, std::optional<bool>& flag) {
  if (file.Find(key) == nullptr) return Status::Ok();
  COHORT_ASSIGN_OR_RETURN(flag, file.GetBool(key));
  return Status::Ok();
}

}  // namespace

Result<VocabData> Tokenizer::ReadVocab(const gguf::File& file) {
  VocabData d;
  COHORT_ASSIGN_OR_RETURN(d.model, file.GetString("tokenizer.ggml.model"));
  COHORT_ASSIGN_OR_RETURN(d.pre, file.GetString("tokenizer.ggml.pre", ""));
  COHORT_ASSIGN_OR_RETURN(d.general_name, file.GetString("general.name", ""));
  COHORT_ASSIGN_OR_RETURN(d.tokens, ReadStrings(file, "tokenizer.ggml.tokens", true));
  COHORT_ASSIGN_OR_RETURN(d.merges, ReadStrings(file, "tokenizer.ggml.merges", false));
  COHORT_ASSIGN_OR_RETURN(d.scores, ReadScores(file));
  COHORT_ASSIGN_OR_RETURN(d.types, ReadTypes(file));
  const std::pair<std::string_view, std::optional<uint64_t>*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &d.bos_id},
      {"tokenizer.ggml.eos_token_id", &d.eos_id},
      {"tokenizer.ggml.eot_token_id", &d.eot_id},
      {"tokenizer.ggml.eom_token_id", &d.eom_id},
      {"tokenizer.ggml.unknown_token_id", &d.unk_id},
      {"tokenizer.ggml.seperator_token_id", &d.sep_id},  // sic: llama.cpp's spelling
      {"tokenizer.ggml.padding_token_id", &d.pad_id},
      {"tokenizer.ggml.mask_token_id", &d.mask_id},
      {"tokenizer.ggml.fim_pre_token_id", &d.fim_pre_id},
      {"tokenizer.ggml.fim_suf_token_id", &d.fim_suf_id},
      {"tokenizer.ggml.fim_mid_token_id", &d.fim_mid_id},
      {"tokenizer.ggml.fim_pad_token_id", &d.fim_pad_id},
      {"tokenizer.ggml.fim_rep_token_id", &d.fim_rep_id},
      {"tokenizer.ggml.fim_sep_token_id", &d.fim_sep_id},
      // Deprecated names, read after the new ones so they win, as in llama.cpp.
      {"tokenizer.ggml.prefix_token_id", &d.fim_pre_id},
      {"tokenizer.ggml.suffix_token_id", &d.fim_suf_id},
      {"tokenizer.ggml.middle_token_id", &d.fim_mid_id},
  };
  for (const auto& [key, id] : ids) COHORT_RETURN_IF_ERROR(ReadId(file, key, *id));
  COHORT_RETURN_IF_ERROR(ReadFlag(file, "tokenizer.ggml.add_bos_token", d.add_bos));
  COHORT_RETURN_IF_ERROR(ReadFlag(file, "tokenizer.ggml.add_eos_token", d.add_eos));
  COHORT_RETURN_IF_ERROR(ReadFlag(file, "tokenizer.ggml.add_space_prefix", d.add_space_prefix));
  return d;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::File& file) {
  COHORT_ASSIGN_OR_RETURN(VocabData data, ReadVocab(file));
  return FromVocab(std::move(data));
}

}  // namespace cohort::tokenizer
