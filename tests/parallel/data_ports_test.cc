// The data channels' fixed ports (PortRange): parsing what --data-ports takes, and a listener
// that takes the first free port of its range, past the ones in use, or says the range is full.
#include <gtest/gtest.h>

#include "parallel/session.h"

namespace cohort::parallel {
namespace {

TEST(DataPorts, ParsesPortsAndRanges) {
  EXPECT_TRUE(PortRange::Parse("")->any());
  EXPECT_TRUE(PortRange::Parse("0")->any());
  auto one = PortRange::Parse("7950");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->first, 7950);
  EXPECT_EQ(one->last, 7950);
  auto range = PortRange::Parse("7950-7999");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->first, 7950);
  EXPECT_EQ(range->last, 7999);
  EXPECT_EQ(range->ToString(), "7950-7999");
  for (const char* bad : {"7999-7950", "x", "7950-", "-7950", "70000", "1-2-3", "0-5"}) {
    EXPECT_EQ(PortRange::Parse(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DataPorts, ListenersTakeTheFirstFreePortOfTheRange) {
  // A range of three ports that are free now (found by binding any port and its neighbours).
  int base = 0;
  std::unique_ptr<comm::TcpListener> held[3];
  for (int attempt = 0; attempt < 20 && base == 0; ++attempt) {
    auto any = comm::TcpListener::Bind("127.0.0.1:0");
    ASSERT_TRUE(any.ok());
    const std::string address = (*any)->address();
    const int port = std::stoi(address.substr(address.rfind(':') + 1));
    any->reset();
    if (port > 65000) continue;
    bool free = true;
    for (int k = 0; k < 3 && free; ++k) {
      auto b = comm::TcpListener::Bind("127.0.0.1:" + std::to_string(port + k));
      free = b.ok();
      if (free) held[k] = std::move(*b);
    }
    for (auto& h : held) h.reset();
    if (free) base = port;
  }
  ASSERT_GT(base, 0);
  const PortRange range{base, base + 2};
  auto first = BindDataListener("127.0.0.1", range);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)->address(), "127.0.0.1:" + std::to_string(base));
  auto second = BindDataListener("127.0.0.1", range);
  auto third = BindDataListener("127.0.0.1", range);
  ASSERT_TRUE(second.ok() && third.ok());
  EXPECT_EQ((*third)->address(), "127.0.0.1:" + std::to_string(base + 2));
  auto full = BindDataListener("127.0.0.1", range);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.status().message().find("no free data port in " + range.ToString()), std::string::npos)
      << full.status().ToString();
}

}  // namespace
}  // namespace cohort::parallel
