// Instances as data: entries survive JSON, the placement puts rank 0 on a node holding the
// file, honours the node count and each node's memory budget (the demo model under a budget
// no single node meets lands on 3 nodes, each holding <= 40% of it), says why when nothing
// fits, and the instance view follows the coordinator's report for the current epoch only,
// with the loading progress it reported while it loads.
#include "cluster/instance.h"
#include "cluster/instance_progress.h"

#include <gtest/gtest.h>

#include "plan/gguf_shape.h"
#include "plan/shard_plan.h"

namespace cohort::cluster {
namespace {

ModelEntry DemoModel() {
  const std::string path = std::string(COHORT_SOURCE_DIR) + "/models/stories260K.gguf";
  auto g = plan::ReadGgufModel(path);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  ModelEntry m;
  m.name = "stories260K";
  m.path = path;
  m.sha256 = "5a9d";
  m.file_bytes = static_cast<int64_t>(g->file_bytes);
  m.n_ctx_train = 512;
  m.shape = g->shape;
  m.quant = g->quant;
  return m;
}

PlacementNode Node(int i, bool has_file, int64_t budget) {
  PlacementNode n;
  n.service.id = std::string(31, '0') + std::to_string(i);
  n.service.name = "n" + std::to_string(i);
  n.service.worker = "10.0.0." + std::to_string(i) + ":7070";
  n.service.api = "10.0.0." + std::to_string(i) + ":8080";
  n.service.max_memory_bytes = budget;
  if (has_file) n.service.files["5a9d"] = "/models/n" + std::to_string(i) + ".gguf";
  n.profile = BudgetProfile(n.service.name, 8e9, 4e9, 0, 0, budget);
  return n;
}

PlacementInput Input(std::vector<PlacementNode> nodes, int want_nodes) {
  PlacementInput in;
  in.model = DemoModel();
  in.layout = "tp";
  in.nodes = want_nodes;
  in.context_tokens = 128;
  in.sequences = 4;
  in.candidates = std::move(nodes);
  in.link = {"lan", 100e-6, 1e9, false, "test"};
  return in;
}

TEST(InstanceTest, EntriesRoundTripThroughJson) {
  Instance i;
  i.id = "demo";
  i.model = "stories260K";
  i.nodes = 3;
  i.epoch = 7;
  i.status = InstanceStatus::kPlaced;
  i.coordinator = "abc";
  i.model_path = "/m.gguf";
  i.model_sha256 = "5a9d";
  i.plan_label = "tp2";
  auto made = plan::MakePlan(DemoModel().shape.ToPlanShape(DemoModel().quant.block), plan::LayoutSpec::TensorWeighted({1, 2}));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  i.plan = *made;
  i.ranks = {{"abc", "n1", "h:1", 10, 20}, {"def", "n2", "h:2", 30, 40}};
  auto back = InstanceFromJson(InstanceToJson(i));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(InstanceToJson(*back), InstanceToJson(i));
  EXPECT_EQ(back->ranks[1].worker, "h:2");
  EXPECT_EQ(back->plan, i.plan);  // the planner's plan, exactly

  const ModelEntry m = DemoModel();
  auto m2 = ModelEntryFromJson(ModelEntryToJson(m));
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ(ModelEntryToJson(*m2), ModelEntryToJson(m));

  NodeService s = Node(1, true, 123).service;
  auto s2 = NodeServiceFromJson(NodeServiceToJson(s));
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(*s2, s);
  EXPECT_FALSE(NodeServiceFromJson(nlohmann::json{{"id", 1}}).ok());
  EXPECT_FALSE(RunReportFromJson(nlohmann::json::array()).ok());
}

TEST(InstanceTest, PlacesOnTheAskedNodesWithTheFileHolderAsCoordinator) {
  Instance out;
  // Only n3 holds the file: it must be rank 0 wherever the planner ordered it.
  ASSERT_TRUE(PlaceInstance(Input({Node(1, false, 0), Node(2, false, 0), Node(3, true, 0)}, 3), &out).ok());
  EXPECT_EQ(out.status, InstanceStatus::kPlaced);
  ASSERT_EQ(out.ranks.size(), 3u);
  EXPECT_EQ(out.coordinator, Node(3, true, 0).service.id);
  EXPECT_EQ(out.ranks[0].node, out.coordinator);
  EXPECT_EQ(out.model_path, "/models/n3.gguf");
  EXPECT_EQ(out.model_sha256, "5a9d");
  // The plan the coordinator runs is the one the planner scored: 3 ranks of one stage.
  EXPECT_EQ(out.plan.n_ranks(), 3);
  EXPECT_EQ(out.plan.n_stages(), 1);
  EXPECT_TRUE(out.plan.Validate().ok());
  // Fewer live nodes than asked: all of them.
  ASSERT_TRUE(PlaceInstance(Input({Node(1, true, 0), Node(2, false, 0)}, 3), &out).ok());
  EXPECT_EQ(out.ranks.size(), 2u);
}

TEST(InstanceTest, NoFileHolderIsNotFound) {
  Instance out;
  const Status s = PlaceInstance(Input({Node(1, false, 0), Node(2, false, 0)}, 0), &out);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
}

TEST(InstanceTest, BudgetNoNodeMeetsSpreadsOverThreeEachUnderFortyPercent) {
  const ModelEntry m = DemoModel();
  const int64_t budget = m.file_bytes * 55 / 100;
  Instance out;
  ASSERT_TRUE(PlaceInstance(Input({Node(1, true, budget), Node(2, true, budget), Node(3, true, budget)}, 0), &out).ok());
  ASSERT_EQ(out.ranks.size(), 3u);
  for (const RankPlacement& r : out.ranks) {
    EXPECT_LE(r.weight_bytes, 0.4 * m.file_bytes) << r.name;
    EXPECT_LE(r.weight_bytes + r.kv_bytes, budget) << r.name;
  }
  // Two such nodes cannot hold it: the reason names the closest try.
  const Status s = PlaceInstance(Input({Node(1, true, budget), Node(2, true, budget)}, 0), &out);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("fits on no tp layout of the 2 live node(s)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("its budget is"), std::string::npos) << s.message();
}

// A node measured at `bandwidth_Bps` (the planner orders nodes fastest first by it).
PlacementNode MeasuredNode(int i, bool has_file, double bandwidth_Bps) {
  PlacementNode n = Node(i, has_file, 0);
  n.profile = BudgetProfile(n.service.name, 8e9, 4e9, bandwidth_Bps, 0, 0);
  return n;
}

// The flake of `NODES=2 LAYOUT=pp scripts/run.sh`: the node holding the file (the one the
// model was loaded through, before the others publish that they hold it too) measured
// slower than a peer, so the planner ordered it after that peer, and pipeline and hybrid
// layouts could not move it to rank 0. Every layout that fits must place with the holder as
// rank 0 (stage 0), wherever the measured speeds order it.
TEST(InstanceTest, PipelineAndHybridPlaceWithTheSlowestNodeHoldingTheFileAsRankZero) {
  struct Case {
    const char* layout;
    int nodes;
    int stages;
  };
  for (const Case c : {Case{"pp", 2, 2}, Case{"pp", 3, 3}, Case{"hybrid", 4, 2}, Case{"tp", 3, 1}}) {
    for (int holder = 1; holder <= c.nodes; ++holder) {
      std::vector<PlacementNode> nodes;
      for (int i = 1; i <= c.nodes; ++i) {
        // The holder is the slowest; the others' speeds differ, so no tie keeps list order.
        nodes.push_back(MeasuredNode(i, i == holder, i == holder ? 5e9 : 10e9 + i * 1e9));
      }
      PlacementInput in = Input(nodes, c.nodes);
      in.layout = c.layout;
      Instance out;
      const Status s = PlaceInstance(in, &out);
      ASSERT_TRUE(s.ok()) << c.layout << " on " << c.nodes << ", holder n" << holder << ": " << s.ToString();
      EXPECT_EQ(out.coordinator, nodes[holder - 1].service.id) << c.layout << " holder n" << holder;
      ASSERT_EQ(out.ranks.size(), static_cast<size_t>(c.nodes));
      EXPECT_EQ(out.ranks[0].node, out.coordinator);
      EXPECT_EQ(out.plan.n_stages(), c.stages) << out.plan_label;
      EXPECT_EQ(out.plan.n_ranks(), c.nodes);
      EXPECT_TRUE(out.plan.Validate().ok());
      EXPECT_EQ(out.model_path, "/models/n" + std::to_string(holder) + ".gguf");
    }
  }
}

// When nothing is placed for a reason other than memory, the reason says so and does not
// blame a budget: a hybrid layout on 3 of 4 nodes does not exist (2x2 needs all four).
TEST(InstanceTest, UnplacedReasonNamesANodeCountNotMemory) {
  PlacementInput in = Input({Node(1, true, 0), Node(2, false, 0), Node(3, false, 0), Node(4, false, 0)}, 3);
  in.layout = "hybrid";
  Instance out;
  const Status s = PlaceInstance(in, &out);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("other node counts: hybrid2x2"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("budget"), std::string::npos) << s.message();
}

TEST(InstanceTest, ViewFollowsTheReportOfTheCurrentEpoch) {
  ClusterState state;
  Instance i;
  i.id = "demo";
  i.model = "stories260K";
  i.epoch = 2;
  i.status = InstanceStatus::kPlaced;
  state.placements["demo"] = InstanceToJson(i);
  Instance pending;
  pending.id = "other";
  pending.model = "other-model";
  state.placements["other"] = InstanceToJson(pending);
  state.models["run:demo"] = RunReportToJson({1, RunState::kReady, "", "h:9", "", "abc", {}});  // an old epoch
  auto views = ListInstances(state);
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].state, InstanceState::kLoading);
  EXPECT_EQ(views[1].state, InstanceState::kPending);
  state.models["run:demo"] = RunReportToJson({2, RunState::kReady, "", "h:9", "", "abc", {}});
  views = ListInstances(state);
  EXPECT_TRUE(views[0].ready());
  EXPECT_EQ(InstanceViewToJson(views[0])["api"], "h:9");
  // Requests find it by id, by model name, or as the first ready one.
  EXPECT_EQ(FindInstance(views, "demo")->instance.id, "demo");
  EXPECT_EQ(FindInstance(views, "other-model")->instance.id, "other");
  EXPECT_EQ(FindInstance(views, "")->instance.id, "demo");
  EXPECT_EQ(FindInstance(views, "nope"), nullptr);
  state.models["run:demo"] = RunReportToJson({2, RunState::kFailed, "rank 2 closed the connection", "", "", "abc", {}});
  EXPECT_EQ(ListInstances(state)[0].state, InstanceState::kFailed);
  EXPECT_EQ(InstanceViewToJson(ListInstances(state)[0])["state"], "failed");
}

// The coordinator's account of a load: totals fixed up front, so the percent only grows; a
// rank whose cache held its share skips its transfer; the view shows the current epoch's
// figures while loading and none once ready.
TEST(InstanceTest, LoadProgressOnlyGrowsAndShowsWhileLoading) {
  ManualClock clock;
  InstanceProgress progress(3, clock);
  EXPECT_EQ(progress.Snapshot().phase, "start");
  // n1 coordinates with the file; n2 and n3 are streamed 300 bytes each and read 300.
  progress.SetRanks({{"a", "n1", 0, 400}, {"b", "n2", 300, 300}, {"c", "n3", 300, 300}});
  double last = 0;
  const auto step = [&](int rank, const char* phase, uint64_t done, uint64_t total) {
    clock.Advance(std::chrono::seconds(1));
    progress.Update(rank, phase, done, total);
    const LoadProgress p = progress.Snapshot();
    EXPECT_GE(p.figures.percent(), last) << rank << phase << done;
    last = p.figures.percent();
    return p;
  };
  step(0, "load", 400, 400);
  LoadProgress p = step(1, "transfer", 150, 300);
  EXPECT_EQ(p.phase, "transfer");
  EXPECT_EQ(p.figures.bytes_total, 1600u);
  EXPECT_EQ(p.figures.bytes_done, 550u);
  EXPECT_DOUBLE_EQ(p.figures.rate_bytes_per_s, 275);  // 550 bytes over 2 s
  EXPECT_NEAR(p.figures.eta_s, 1050.0 / 275, 1e-9);
  EXPECT_EQ(p.ranks[1].phase, "transfer");
  EXPECT_DOUBLE_EQ(p.ranks[1].figures.percent(), 25);
  step(1, "transfer", 300, 300);
  step(2, "load", 100, 300);  // n3's cache held its share: no transfer, counted as done
  p = step(1, "load", 300, 300);
  EXPECT_EQ(p.ranks[2].phase, "load");
  EXPECT_EQ(p.phase, "load");
  p = step(2, "load", 300, 300);
  EXPECT_EQ(p.phase, "connect");
  EXPECT_DOUBLE_EQ(p.figures.percent(), 100);
  step(1, "transfer", 10, 300);  // late or repeated figures never go back
  EXPECT_DOUBLE_EQ(progress.Snapshot().figures.percent(), 100);

  // In the agreed state: shown for the epoch it was made for, while the instance loads.
  ClusterState state;
  Instance i;
  i.id = "demo";
  i.model = "stories260K";
  i.epoch = 3;
  i.status = InstanceStatus::kPlaced;
  state.placements["demo"] = InstanceToJson(i);
  LoadProgress midway = progress.Snapshot();
  ASSERT_TRUE(state.Apply(PutLoadProgress("demo", midway)).ok());
  auto j = InstanceViewToJson(ListInstances(state)[0]);
  ASSERT_TRUE(j.contains("progress")) << j.dump();
  EXPECT_EQ(j["progress"]["phase"], "connect");
  EXPECT_EQ(j["progress"]["percent"], 100.0);
  EXPECT_EQ(j["progress"]["nodes"].size(), 3u);
  EXPECT_EQ(j["progress"]["nodes"][1]["name"], "n2");
  auto back = LoadProgressFromJson(LoadProgressToJson(midway));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->figures.bytes_done, midway.figures.bytes_done);
  EXPECT_EQ(back->ranks.size(), 3u);
  i.epoch = 4;  // re-placed: the old epoch's figures are not this one's
  state.placements["demo"] = InstanceToJson(i);
  j = InstanceViewToJson(ListInstances(state)[0]);
  EXPECT_EQ(j["progress"]["phase"], "start");
  EXPECT_EQ(j["progress"]["bytes_done"], 0);
  state.models["run:demo"] = RunReportToJson({4, RunState::kReady, "", "h:9", "", "abc", {}});
  EXPECT_FALSE(InstanceViewToJson(ListInstances(state)[0]).contains("progress"));
  Instance pending;
  pending.id = "later";
  pending.model = "stories260K";
  state.placements["later"] = InstanceToJson(pending);
  EXPECT_EQ(InstanceViewToJson(ListInstances(state)[1])["progress"]["phase"], "placement");
}

}  // namespace
}  // namespace cohort::cluster
