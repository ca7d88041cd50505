// The loader of each supported architecture (one file each), called by Model::Load.
#pragma once

#include <memory>

#include "core/status.h"
#include "model/config.h"
#include "model/model.h"

namespace cohort::gguf {
class File;
}

namespace cohort::model {

Result<std::unique_ptr<Model>> LoadLlama(const gguf::File& file, const ModelConfig& c);
Result<std::unique_ptr<Model>> LoadQwen2(const gguf::File& file, const ModelConfig& c);
Result<std::unique_ptr<Model>> LoadQwen3(const gguf::File& file, const ModelConfig& c);
Result<std::unique_ptr<Model>> LoadQwen3Moe(const gguf::File& file, const ModelConfig& c);
Result<std::unique_ptr<Model>> LoadDeepseek2(const gguf::File& file, const ModelConfig& c);
Result<std::unique_ptr<Model>> LoadGlm4Moe(const gguf::File& file, const ModelConfig& c);
Result<std::unique_ptr<Model>> LoadMinimaxM2(const gguf::File& file, const ModelConfig& c);
Result<std::unique_ptr<Model>> LoadQwen35(const gguf::File& file, const ModelConfig& c);
Result<std::unique_ptr<Model>> LoadQwen35Moe(const gguf::File& file, const ModelConfig& c);
Result<std::unique_ptr<Model>> LoadGptOss(const gguf::File& file, const ModelConfig& c);

}  // namespace cohort::model
