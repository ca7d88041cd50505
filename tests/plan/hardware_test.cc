// Node specs (the example files, measured overrides, errors) and model shapes read from GGUF.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "plan/gguf_shape.h"
#include "plan/hardware.h"
#include "gguf/gguf.h"

namespace cohort::plan {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ClusterSpec, ParsesExampleFiles) {
  const std::string dir = std::string(COHORT_SOURCE_DIR) + "/examples/plan/";
  auto rdma = ParseClusterSpec(ReadText(dir + "mac-studio-x4-rdma.json"));
  ASSERT_TRUE(rdma.ok()) << rdma.status().ToString();
  EXPECT_EQ(rdma->nodes.size(), 4u);
  EXPECT_EQ(rdma->link.name, "tb5-rdma");
  EXPECT_EQ(rdma->stack.name, "cohort");
  EXPECT_EQ(rdma->topology, Topology::kFullMesh);

  auto mixed = ParseClusterSpec(ReadText(dir + "mixed-measured.json"));
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  ASSERT_EQ(mixed->nodes.size(), 3u);
  EXPECT_EQ(mixed->nodes[0].name, "studio");
  EXPECT_EQ(mixed->nodes[2].memory_bandwidth_Bps, 240e9);
  EXPECT_EQ(mixed->nodes[2].flops, 8.5e12);
  EXPECT_DOUBLE_EQ(mixed->link.latency_s, 12e-6);
  EXPECT_EQ(mixed->link.bandwidth_Bps, 80e9 / 8);  // kept from the tb5-rdma profile
  EXPECT_EQ(mixed->topology, Topology::kChain);
  EXPECT_EQ(mixed->stack.bandwidth_efficiency, 0.75);
  EXPECT_DOUBLE_EQ(mixed->stack.collective_overhead_s, 20e-6);

  for (const char* name : {"mac-studio-x4-llamacpp-tcp.json", "three-vms-like-this-one.json"}) {
    EXPECT_TRUE(ParseClusterSpec(ReadText(dir + name)).ok()) << name;
  }
}

TEST(ClusterSpec, RejectsBadSpecs) {
  EXPECT_EQ(ParseClusterSpec("{").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseClusterSpec(R"({"link": "tb5-rdma"})").ok());
  EXPECT_EQ(ParseClusterSpec(R"({"nodes": [{"profile": "cray-1"}]})").status().code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(ParseClusterSpec(R"({"nodes": [{"memory_gb": 64, "memory_bandwidth_gb_s": -1, "tflops": 1}]})").ok());
  EXPECT_FALSE(ParseClusterSpec(R"({"nodes": [{"profile": "this-machine", "count": 2}]})").ok());
  EXPECT_FALSE(ParseClusterSpec(R"({"nodes": [{"profile": "this-machine", "count": 0}], "link": "1gbe"})").ok());
  EXPECT_FALSE(ParseClusterSpec(R"({"nodes": [{"profile": "this-machine"}], "topology": "torus"})").ok());
  EXPECT_FALSE(ParseClusterSpec(R"({"nodes": [{"profile": "this-machine", "memory_gb": "lots"}]})").ok());
  auto one = ParseClusterSpec(R"({"nodes": [{"profile": "this-machine"}]})");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->nodes[0].memory_bandwidth_Bps, 40e9);
  // cohort's pipeline returns f32 logits to the coordinator; a spec may say otherwise.
  EXPECT_EQ(one->stack.logits_return_bytes, 4);
  auto no_return = ParseClusterSpec(R"({"nodes": [{"profile": "this-machine"}], "stack": {"base": "cohort", "logits_return_bytes": 0}})");
  ASSERT_TRUE(no_return.ok()) << no_return.status().ToString();
  EXPECT_EQ(no_return->stack.logits_return_bytes, 0);
  EXPECT_FALSE(ParseClusterSpec(R"({"nodes": [{"profile": "this-machine"}], "stack": {"base": "cohort", "logits_return_bytes": -4}})").ok());
}

double SumOfMatrices(const std::string& path) {
  auto file = gguf::File::Open(path);
  EXPECT_TRUE(file.ok());
  double sum = 0;
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    if (t.ne.size() >= 2 && t.ne[1] > 1) sum += static_cast<double>(t.n_elements());
  }
  return sum;
}

TEST(GgufShape, CountsEveryMatrixOfTheFixtures) {
  const std::string dir = std::string(COHORT_TEST_DATA) + "/fixtures/models/";
  for (const char* arch : {"llama", "qwen2", "qwen3", "qwen3moe", "deepseek2"}) {
    const std::string path = dir + "tiny-" + arch + "-f32.gguf";
    auto m = ReadGgufModel(path);
    ASSERT_TRUE(m.ok()) << arch << ": " << m.status().ToString();
    EXPECT_EQ(m->shape.n_embd, 256) << arch;
    EXPECT_EQ(m->shape.n_vocab, 512) << arch;
    EXPECT_EQ(m->quant.bits_dense, 32) << arch;
    // The parameter accounting the cost model uses equals the file's matrices exactly.
    EXPECT_EQ(m->shape.TotalParams(), SumOfMatrices(path)) << arch;
  }
  auto llama = ReadGgufModel(dir + "tiny-llama-f32.gguf");
  EXPECT_EQ(llama->shape.n_layer, 2);
  EXPECT_EQ(llama->shape.n_head_kv, 2);
  EXPECT_EQ(llama->shape.head_dim, 64);
  EXPECT_FALSE(llama->shape.tied_embeddings);
  auto moe = ReadGgufModel(dir + "tiny-qwen3moe-f32.gguf");
  EXPECT_EQ(moe->shape.n_expert, 8);
  EXPECT_EQ(moe->shape.n_expert_used, 2);
  EXPECT_EQ(moe->shape.n_ff_expert, 64);
  auto ds = ReadGgufModel(dir + "tiny-deepseek2-f32.gguf");
  EXPECT_TRUE(ds->shape.is_mla());
  EXPECT_EQ(ds->shape.n_leading_dense, 1);
  EXPECT_EQ(ds->shape.n_expert_shared, 1);
  auto k = ReadGgufModel(dir + "tiny-llama-q4_k_m.gguf");
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->quant.block, 256);
  EXPECT_LT(k->quant.bits_dense, 8);
  EXPECT_EQ(ReadGgufModel(dir + "missing.gguf").ok(), false);
}

}  // namespace
}  // namespace cohort::plan
