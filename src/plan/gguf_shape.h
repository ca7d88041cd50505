// Reads a model's size from a GGUF file: its dimensions (ModelShape), the context it was
// trained for, and the bits per weight of each tensor class as actually stored (QuantScheme).
// ModelShapeFromGguf is the one reader of the dimension keys; model::ModelConfig builds on it.
#pragma once

#include <string>

#include "core/status.h"
#include "plan/model_shape.h"

namespace cohort::gguf {
class File;
}

namespace cohort::plan {

// The dimensions from the `<arch>.*` keys, read as llama.cpp's loader reads them (same keys,
// same defaults). Errors name the key. Not validated, and `name` is left empty: the planner
// (ModelShape::Validate) and the model layer (ModelConfig::Validate) check with their own rules.
Result<ModelShape> ModelShapeFromGguf(const gguf::File& file);

// `<arch>.context_length`, which every llama.cpp converter writes.
Result<int> TrainedContextFromGguf(const gguf::File& file);

struct GgufModel {
  ModelShape shape;    // validated; `name` is the path
  QuantScheme quant;   // measured from the tensor types in the file
  double file_bytes = 0;
  int n_ctx_train = 0;
};

// Everything above from one open of the file. Only the header and tensor infos are read (the
// file is mapped, no tensor data is touched).
Result<GgufModel> ReadGgufModel(const std::string& path);
// The same from a file already open.
Result<GgufModel> ReadGgufModel(const gguf::File& file);

}  // namespace cohort::plan
