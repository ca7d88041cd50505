// A readable description of a GGUF model file, as `cohort inspect` prints it: the header, the
// architecture's config (or why it cannot run), the tensors by type and one by one, and the
// memory the weights and a KV cache need.
#pragma once

#include <string>

#include "gguf/gguf.h"

namespace cohort::model {

// The report for `file`. The KV-cache estimate is at n_ctx tokens, or at the model's
// training context when n_ctx <= 0; a file whose architecture cannot be run is still
// described, with the reason in place of the config and no KV-cache line.
std::string DescribeModelFile(const gguf::File& file, int n_ctx);

}  // namespace cohort::model
