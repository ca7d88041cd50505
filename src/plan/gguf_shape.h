// Reads what the planner needs from a GGUF file: the model's dimensions (ModelShape) and the
// bits per weight of each tensor class as actually stored (QuantScheme).
#pragma once

#include <string>

#include "plan/model_shape.h"
#include "core/status.h"

namespace cohort::plan {

struct GgufModel {
  ModelShape shape;
  QuantScheme quant;   // measured from the tensor types in the file
  double file_bytes = 0;
};

// Only the header and tensor infos are read (the file is mapped, no tensor data is touched).
Result<GgufModel> ReadGgufModel(const std::string& path);

}  // namespace cohort::plan
