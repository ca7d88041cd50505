// Describes a GGUF model file (see inspect.h). The lines are formatted with printf
// conventions (fmt::sprintf) so that the columns read as the format strings beside them.
#include "model/inspect.h"

#include <fmt/format.h>
#include <fmt/printf.h>

#include <iterator>
#include <map>
#include <utility>

#include "core/dtype.h"
#include "model/config.h"

namespace cohort::model {

std::string DescribeModelFile(const gguf::File& f, int n_ctx) {
  std::string out = fmt::sprintf("file          %s\n", f.path());
  out += fmt::sprintf("gguf version  %u, %zu metadata keys, %zu tensors, alignment %llu\n", f.version(),
                      f.metadata().size(), f.tensors().size(), static_cast<unsigned long long>(f.alignment()));
  auto name = f.GetString("general.name", "");
  if (name.ok() && !name->empty()) out += fmt::sprintf("name          %s\n", *name);

  std::map<std::string, std::pair<int, uint64_t>> by_type;  // type -> (tensors, bytes)
  uint64_t weight_bytes = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    auto& slot = by_type[std::string(DTypeName(t.type))];
    slot.first += 1;
    slot.second += t.n_bytes;
    weight_bytes += t.n_bytes;
  }
  auto config = ModelConfig::FromGguf(f);
  if (config.ok()) {
    out += fmt::sprintf("\n%s\n", config->ToString());
  } else {
    out += fmt::sprintf("\narchitecture  %s (not runnable: %s)\n", f.architecture(), config.status().ToString());
  }

  out += "\ntensors by type\n";
  for (const auto& [type, count_bytes] : by_type) {
    out += fmt::sprintf("  %-6s %5d tensors %12.2f MiB\n", type, count_bytes.first, count_bytes.second / 1048576.0);
  }
  out += "\ntensors\n";
  for (const gguf::TensorInfo& t : f.tensors()) {
    std::string shape;
    for (size_t i = 0; i < t.ne.size(); ++i) fmt::format_to(std::back_inserter(shape), "{}{}", i ? " x " : "", t.ne[i]);
    out += fmt::sprintf("  %-32s %-6s [%s] %.2f MiB\n", t.name, std::string(DTypeName(t.type)), shape,
                        t.n_bytes / 1048576.0);
  }

  out += fmt::sprintf("\nmemory\n  weights       %.2f MiB\n", weight_bytes / 1048576.0);
  if (config.ok()) {
    const int ctx = n_ctx > 0 ? n_ctx : config->n_ctx_train;
    // Per token and layer: MLA caches the latent plus the shared rope key; other attention
    // caches every KV head's key and value.
    const int64_t per_layer = config->mla.kv_lora_rank > 0
                                  ? config->mla.kv_lora_rank + config->mla.qk_rope_dim
                                  : static_cast<int64_t>(config->n_head_kv) * (config->head_dim_k + config->head_dim_v);
    const double elements = static_cast<double>(per_layer) * config->n_layer * ctx;
    out += fmt::sprintf("  KV cache      %.2f MiB (f32) / %.2f MiB (f16) at context %d\n", elements * 4 / 1048576.0,
                        elements * 2 / 1048576.0, ctx);
  }
  return out;
}

}  // namespace cohort::model
