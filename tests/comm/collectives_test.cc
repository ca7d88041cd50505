// Collectives over every transport, for 1..5 ranks (threads in this process) and sizes from one
// float to 1M: results equal the analytic values and are bitwise identical on every rank.
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "comm/all_gather.h"
#include "comm/all_reduce.h"
#include "comm/barrier.h"
#include "comm/broadcast.h"
#include "comm/gather.h"
#include "comm/local_group.h"
#include "comm/point_to_point.h"
#include "comm/q8_wire.h"

namespace cohort::comm {
namespace {

// Multiples of 1/4 in [-12.5, 12.5]: every partial sum is exact, so any summation order must
// give exactly the analytic result.
float Value(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 101) - 50) * 0.25f;
}

std::vector<std::unique_ptr<Communicator>> MakeComms(TransportKind kind, int n) {
  auto group = MakeLocalGroup(kind, n);
  EXPECT_TRUE(group.ok()) << group.status().ToString();
  std::vector<std::unique_ptr<Communicator>> comms;
  if (!group.ok()) return comms;
  for (auto& transport : *group) {
    comms.push_back(std::make_unique<Communicator>(std::move(transport)));
  }
  return comms;
}

void ExpectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  }
}

using Param = std::tuple<TransportKind, int, size_t>;

class CollectivesTest : public ::testing::TestWithParam<Param> {
 protected:
  TransportKind kind() const { return std::get<0>(GetParam()); }
  int n() const { return std::get<1>(GetParam()); }
  size_t count() const { return std::get<2>(GetParam()); }
};

TEST_P(CollectivesTest, AllReduceEqualsAnalyticSumOnEveryAlgorithm) {
  auto comms = MakeComms(kind(), n());
  ASSERT_EQ(comms.size(), size_t(n()));
  for (AllReduceAlgorithm algorithm :
       {AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kDirect, AllReduceAlgorithm::kRing}) {
    std::vector<std::vector<float>> data(n());
    ExpectAllOk(RunOnRanks(n(), [&](int r) {
      data[r].resize(count());
      for (size_t i = 0; i < count(); ++i) data[r][i] = Value(r, i);
      return AllReduceSum(*comms[r], data[r], {.algorithm = algorithm});
    }));
    for (size_t i = 0; i < count(); ++i) {
      float expected = 0;
      for (int r = 0; r < n(); ++r) expected += Value(r, i);
      ASSERT_EQ(data[0][i], expected) << "element " << i << " algorithm " << int(algorithm);
    }
    for (int r = 1; r < n(); ++r) {
      ASSERT_EQ(std::memcmp(data[r].data(), data[0].data(), count() * 4), 0) << "rank " << r;
    }
  }
}

TEST_P(CollectivesTest, AllReduceOfInexactValuesIsBitwiseIdenticalAcrossRanks) {
  auto comms = MakeComms(kind(), n());
  ASSERT_EQ(comms.size(), size_t(n()));
  std::vector<std::vector<float>> data(n());
  std::vector<double> exact(count(), 0.0);
  for (int r = 0; r < n(); ++r) {
    std::mt19937 rng(1234 + r);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    data[r].resize(count());
    for (size_t i = 0; i < count(); ++i) {
      data[r][i] = dist(rng);
      exact[i] += data[r][i];
    }
  }
  ExpectAllOk(RunOnRanks(n(), [&](int r) { return AllReduceSum(*comms[r], data[r]); }));
  for (int r = 1; r < n(); ++r) {
    ASSERT_EQ(std::memcmp(data[r].data(), data[0].data(), count() * 4), 0) << "rank " << r;
  }
  for (size_t i = 0; i < count(); ++i) ASSERT_NEAR(data[0][i], exact[i], 1e-5 * n());
}

TEST_P(CollectivesTest, AllGatherBroadcastBarrierAndPointToPoint) {
  auto comms = MakeComms(kind(), n());
  ASSERT_EQ(comms.size(), size_t(n()));
  const size_t bytes = count() * 4;
  std::vector<std::vector<std::byte>> gathered(n(), std::vector<std::byte>(bytes * n()));
  std::vector<std::vector<std::byte>> broadcast(n(), std::vector<std::byte>(bytes));
  const int root = n() - 1;
  auto pattern = [](int r, size_t i) { return static_cast<std::byte>((r * 31 + i * 7) & 0xff); };
  ExpectAllOk(RunOnRanks(n(), [&](int r) -> Status {
    std::vector<std::byte> mine(bytes);
    for (size_t i = 0; i < bytes; ++i) mine[i] = pattern(r, i);
    COHORT_RETURN_IF_ERROR(AllGather(*comms[r], mine, gathered[r]));
    if (r == root) broadcast[r] = mine;
    COHORT_RETURN_IF_ERROR(Broadcast(*comms[r], root, broadcast[r]));
    COHORT_RETURN_IF_ERROR(Barrier(*comms[r]));
    // A pipeline hop: rank r passes its block to r + 1.
    if (r + 1 < n()) COHORT_RETURN_IF_ERROR(SendTo(*comms[r], r + 1, mine, 7));
    if (r > 0) {
      std::vector<std::byte> got(bytes);
      COHORT_RETURN_IF_ERROR(RecvFrom(*comms[r], r - 1, got, 7));
      for (size_t i = 0; i < bytes; ++i) {
        if (got[i] != pattern(r - 1, i)) return Internal("point-to-point bytes differ");
      }
    }
    return Barrier(*comms[r]);
  }));
  for (int r = 0; r < n(); ++r) {
    for (int src = 0; src < n(); ++src) {
      for (size_t i = 0; i < bytes; i += 97) {
        ASSERT_EQ(gathered[r][src * bytes + i], pattern(src, i)) << r << " " << src << " " << i;
      }
    }
    for (size_t i = 0; i < bytes; i += 97) ASSERT_EQ(broadcast[r][i], pattern(root, i));
  }
}

// Uneven blocks (an empty one among them from three ranks up) to the first and to the last
// rank: the root ends with every block in rank order, whether its own is copied in or was
// written in place beforehand. The other ranks pass no buffer for the result.
TEST_P(CollectivesTest, GatherPutsEveryBlockInRankOrderOnTheRoot) {
  auto comms = MakeComms(kind(), n());
  ASSERT_EQ(comms.size(), size_t(n()));
  std::vector<size_t> sizes(n());
  for (int r = 0; r < n(); ++r) sizes[r] = (r == 1 && n() > 2) ? 0 : count() * 4 + 3 * r;
  std::vector<size_t> offsets(n(), 0);
  for (int r = 1; r < n(); ++r) offsets[r] = offsets[r - 1] + sizes[r - 1];
  const size_t total = offsets[n() - 1] + sizes[n() - 1];
  auto pattern = [](int r, size_t i) { return static_cast<std::byte>((r * 29 + i * 11 + 1) & 0xff); };
  std::vector<std::byte> want(total);
  for (int r = 0; r < n(); ++r) {
    for (size_t i = 0; i < sizes[r]; ++i) want[offsets[r] + i] = pattern(r, i);
  }
  for (const int root : {0, n() - 1}) {
    for (const bool in_place : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "root " << root << " in_place " << in_place);
      std::vector<std::byte> all(total, std::byte{0xEE});
      ExpectAllOk(RunOnRanks(n(), [&](int r) -> Status {
        std::vector<std::byte> own(sizes[r]);
        std::span<std::byte> mine(own);
        if (r == root && in_place) mine = std::span(all).subspan(offsets[r], sizes[r]);
        for (size_t i = 0; i < mine.size(); ++i) mine[i] = pattern(r, i);
        return Gather(*comms[r], root, mine, sizes, r == root ? std::span(all) : std::span<std::byte>());
      }));
      ASSERT_EQ(all.size(), want.size());
      for (size_t i = 0; i < total; ++i) ASSERT_EQ(all[i], want[i]) << "byte " << i;
    }
  }
}

TEST_P(CollectivesTest, Q8AllReduceStaysWithinQuantisationBound) {
  auto comms = MakeComms(kind(), n());
  ASSERT_EQ(comms.size(), size_t(n()));
  std::vector<std::vector<float>> data(n()), input(n());
  for (int r = 0; r < n(); ++r) {
    std::mt19937 rng(99 + r);
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    for (size_t i = 0; i < count(); ++i) input[r].push_back(dist(rng));
    data[r] = input[r];
  }
  ExpectAllOk(RunOnRanks(n(), [&](int r) {
    return AllReduceSum(*comms[r], data[r], {.wire = WireFormat::kQ8});
  }));
  const size_t n_blocks = (count() + kQ8Block - 1) / kQ8Block;
  std::vector<double> bound(n_blocks, 0.0);  // sum over ranks of half a quantisation step
  for (int r = 0; r < n(); ++r) {
    for (size_t b = 0; b < n_blocks; ++b) {
      float amax = 0;
      for (size_t j = b * kQ8Block; j < std::min(count(), (b + 1) * kQ8Block); ++j) {
        amax = std::max(amax, std::fabs(input[r][j]));
      }
      bound[b] += amax / 254.0 * (1 + 1e-5) + 1e-6;
    }
  }
  for (size_t i = 0; i < count(); ++i) {
    double exact = 0;
    for (int r = 0; r < n(); ++r) exact += input[r][i];
    ASSERT_LE(std::fabs(data[0][i] - exact), bound[i / kQ8Block]) << "element " << i;
  }
  for (int r = 1; r < n(); ++r) {
    ASSERT_EQ(std::memcmp(data[r].data(), data[0].data(), count() * 4), 0) << "rank " << r;
  }
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(TransportKindName(std::get<0>(info.param))) + "_ranks" +
         std::to_string(std::get<1>(info.param)) + "_floats" + std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Comm, CollectivesTest,
                         ::testing::Combine(::testing::ValuesIn(AvailableTransportKinds()),
                                            ::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::Values(size_t{1}, size_t{7}, size_t{4096},
                                                              size_t{1} << 20)),
                         ParamName);

}  // namespace
}  // namespace cohort::comm
