// The TCP link emulation delays delivery by the configured one-way latency and caps bandwidth.
#include <gtest/gtest.h>

#include "comm/local_group.h"
#include "comm/tcp_transport.h"

namespace cohort::comm {
namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

TEST(LinkEmulationTest, RoundTripCostsAtLeastTwiceTheLatency) {
  TcpOptions base;
  base.link.latency_us = 3000;
  auto group = MakeLocalTcpGroup(2, base);
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  std::vector<std::byte> ping(64, std::byte{1}), pong(64);
  std::vector<double> round_trips;
  auto statuses = RunOnRanks(2, [&](int r) -> Status {
    Transport& t = *(*group)[r];
    for (int i = 0; i < 5; ++i) {
      const auto deadline = DeadlineAfter(std::chrono::seconds(5));
      if (r == 0) {
        const auto start = Clock::now();
        COHORT_RETURN_IF_ERROR(t.Send(1, 1, ping, deadline));
        COHORT_RETURN_IF_ERROR(t.Recv(1, 2, pong, deadline));
        round_trips.push_back(Seconds(Clock::now() - start));
      } else {
        std::vector<std::byte> got(64);
        COHORT_RETURN_IF_ERROR(t.Recv(0, 1, got, deadline));
        COHORT_RETURN_IF_ERROR(t.Send(0, 2, got, deadline));
      }
    }
    return Status::Ok();
  });
  for (const Status& s : statuses) ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(round_trips.size(), 5u);
  for (double rt : round_trips) {
    EXPECT_GE(rt, 0.006);
    EXPECT_LT(rt, 0.5);
  }
  EXPECT_EQ(pong[0], std::byte{1});
}

TEST(LinkEmulationTest, BandwidthCapDelaysLargeMessages) {
  TcpOptions base;
  base.link.bandwidth_bytes_per_s = 50'000'000;  // 1 MB takes 20 ms
  auto group = MakeLocalTcpGroup(2, base);
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  std::vector<std::byte> big(1'000'000, std::byte{3}), got(1'000'000);
  double elapsed = 0;
  auto statuses = RunOnRanks(2, [&](int r) -> Status {
    const auto deadline = DeadlineAfter(std::chrono::seconds(5));
    if (r == 0) return (*group)[0]->Send(1, 9, big, deadline);
    const auto start = Clock::now();
    Status s = (*group)[1]->Recv(0, 9, got, deadline);
    elapsed = Seconds(Clock::now() - start);
    return s;
  });
  for (const Status& s : statuses) ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(elapsed, 0.019);
  EXPECT_LT(elapsed, 2.0);
  EXPECT_EQ(got[999'999], std::byte{3});
}

}  // namespace
}  // namespace cohort::comm
