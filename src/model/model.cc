// Model::Load: parses the config and hands the file to its architecture's loader.
#include "model/model.h"

#include "gguf/gguf.h"
#include "model/arch.h"

namespace cohort::model {

Result<std::unique_ptr<Model>> Model::Load(const gguf::File& file) {
  COHORT_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::FromGguf(file));
  switch (config.arch) {
    case Arch::kLlama: return LoadLlama(file, config);
    case Arch::kQwen2: return LoadQwen2(file, config);
    case Arch::kQwen3: return LoadQwen3(file, config);
    case Arch::kQwen3Moe: return LoadQwen3Moe(file, config);
    case Arch::kDeepseek2: return LoadDeepseek2(file, config);
    case Arch::kGlm4Moe: return LoadGlm4Moe(file, config);
    case Arch::kMinimaxM2: return LoadMinimaxM2(file, config);
    case Arch::kQwen35: return LoadQwen35(file, config);
    case Arch::kQwen35Moe: return LoadQwen35Moe(file, config);
    case Arch::kGptOss: return LoadGptOss(file, config);
  }
  return Unsupported("unknown architecture");
}

}  // namespace cohort::model
