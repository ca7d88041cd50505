// llama-imatrix's importance matrix, as llama-quantize --imatrix reads it: for each matrix a
// forward pass multiplied, the mean squared activation of each of its input columns (per expert
// for a 3-D expert tensor). The file is a GGUF holding, per matrix NAME, the tensors
// NAME.in_sum2 (the sums of squares, ne0 x n_mat) and NAME.counts (the tokens each expert saw,
// n_mat); the mean is their quotient, 1 for an expert that saw none.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace cohort::gguf {

class ImportanceMatrix {
 public:
  // A clear error for a file that is not such a GGUF (llama-imatrix's legacy .dat format is
  // not read: llama-imatrix writes GGUF unless told otherwise) or whose tensors disagree.
  static Result<ImportanceMatrix> Load(const std::string& path);

  // The importance of matrix `name`'s columns (ne0 x n_mat values, expert e's at e * ne0), or
  // null when the file measured none for it.
  const std::vector<float>* Find(const std::string& name) const;
  size_t size() const { return entries_.size(); }

 private:
  std::unordered_map<std::string, std::vector<float>> entries_;
};

}  // namespace cohort::gguf
