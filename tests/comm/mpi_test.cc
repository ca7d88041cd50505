// Multi-process tests, run under `mpirun -np 3`: the MPI transport's collectives equal the
// analytic results and MPI_Allreduce, and TCP and shared-memory groups formed between the
// separate processes (addresses exchanged over MPI) give the same bitwise-identical sums.
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

#include "comm/all_gather.h"
#include "comm/all_reduce.h"
#include "comm/barrier.h"
#include "comm/broadcast.h"
#include "comm/comm_bench.h"
#include "comm/mpi_transport.h"
#include "comm/shm_transport.h"
#include "comm/tcp_transport.h"

namespace cohort::comm {
namespace {

MpiRuntime* g_runtime = nullptr;

float Value(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 101) - 50) * 0.25f;
}

uint64_t Fnv1a(std::span<const float> data) {
  uint64_t h = 1469598103934665603ull;
  for (std::byte b : std::as_bytes(data)) h = (h ^ uint64_t(b)) * 1099511628211ull;
  return h;
}

std::unique_ptr<Communicator> MpiComm() {
  auto transport = ConnectMpiGroup(*g_runtime);
  EXPECT_TRUE(transport.ok()) << transport.status().ToString();
  return std::make_unique<Communicator>(std::move(transport).value());
}

// Checks the all-reduce on `comm`, and that every rank (asked over `control`) got the same bytes.
void CheckAllReduce(Communicator& comm, Communicator& control, size_t count,
                    AllReduceAlgorithm algorithm) {
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = Value(comm.rank(), i);
  ASSERT_TRUE(AllReduceSum(comm, data, {.algorithm = algorithm}).ok());
  for (size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < comm.size(); ++r) expected += Value(r, i);
    ASSERT_EQ(data[i], expected) << "element " << i;
  }
  const uint64_t mine = Fnv1a(data);
  std::vector<uint64_t> all(control.size());
  ASSERT_TRUE(AllGather(control, std::as_bytes(std::span(&mine, 1)),
                        std::as_writable_bytes(std::span(all))).ok());
  for (uint64_t h : all) ASSERT_EQ(h, mine);
}

TEST(MpiTest, CollectivesOverMpiTransport) {
  auto comm = MpiComm();
  ASSERT_EQ(comm->size(), 3);
  for (size_t count : {size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 20}) {
    for (auto algorithm : {AllReduceAlgorithm::kDirect, AllReduceAlgorithm::kRing}) {
      CheckAllReduce(*comm, *comm, count, algorithm);
    }
  }
  std::vector<float> ours(4096), theirs(4096);
  for (size_t i = 0; i < ours.size(); ++i) ours[i] = theirs[i] = Value(comm->rank(), i);
  ASSERT_TRUE(AllReduceSum(*comm, ours).ok());
  ASSERT_TRUE(MpiAllReduceSum(theirs).ok());
  EXPECT_EQ(std::memcmp(ours.data(), theirs.data(), ours.size() * 4), 0);
  std::vector<int32_t> block = {comm->rank(), comm->rank() * 10}, gathered(6);
  ASSERT_TRUE(AllGather(*comm, std::as_bytes(std::span(block)), std::as_writable_bytes(std::span(gathered))).ok());
  EXPECT_EQ(gathered[5], 20);
  int32_t value = comm->rank() == 1 ? 77 : 0;
  ASSERT_TRUE(Broadcast(*comm, 1, std::as_writable_bytes(std::span(&value, 1))).ok());
  EXPECT_EQ(value, 77);
  ASSERT_TRUE(Barrier(*comm).ok());
}

TEST(MpiTest, TcpGroupBetweenProcesses) {
  auto control = MpiComm();
  auto listener = TcpListener::Bind("127.0.0.1:0");
  ASSERT_TRUE(listener.ok());
  char mine[64] = {};
  std::snprintf(mine, sizeof(mine), "%s", (*listener)->address().c_str());
  std::vector<char> all(64 * control->size());
  ASSERT_TRUE(AllGather(*control, std::as_bytes(std::span(mine)), std::as_writable_bytes(std::span(all))).ok());
  TcpOptions options;
  options.rank = control->rank();
  for (int r = 0; r < control->size(); ++r) options.addresses.emplace_back(&all[64 * r]);
  options.group_id = 0xc0407;
  auto transport = ConnectTcpGroup(options, std::move(listener).value());
  ASSERT_TRUE(transport.ok()) << transport.status().ToString();
  Communicator comm(std::move(transport).value());
  for (size_t count : {size_t{7}, size_t{4096}, size_t{1} << 20}) {
    CheckAllReduce(comm, *control, count, AllReduceAlgorithm::kAuto);
  }
}

TEST(MpiTest, ShmGroupBetweenProcesses) {
  auto control = MpiComm();
  int32_t pid = getpid();
  ASSERT_TRUE(Broadcast(*control, 0, std::as_writable_bytes(std::span(&pid, 1))).ok());
  ShmOptions options;
  options.rank = control->rank();
  options.n_ranks = control->size();
  options.name = "mpitest-" + std::to_string(pid);
  auto transport = ConnectShmGroup(options);
  ASSERT_TRUE(transport.ok()) << transport.status().ToString();
  Communicator comm(std::move(transport).value());
  for (size_t count : {size_t{7}, size_t{4096}, size_t{1} << 20}) {
    CheckAllReduce(comm, *control, count, AllReduceAlgorithm::kAuto);
  }
}

TEST(MpiBenchTest, ComparesCohortAllReduceWithMpiAllreduce) {
  CommBenchOptions options;
  options.iterations = 200;
  options.warmup = 20;
  auto result = MeasureMpiComm(*g_runtime, options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->rows.size(), 4u);
  EXPECT_EQ(result->rows[0].name, "MPI_Allreduce");
  for (const CommBenchRow& row : result->rows) EXPECT_GT(row.median_us, 0.0) << row.name;
  if (g_runtime->world_rank() == 0) std::printf("%s", FormatCommBench(options, *result).c_str());
}

}  // namespace
}  // namespace cohort::comm

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto runtime = cohort::comm::MpiRuntime::Init();
  if (!runtime.ok()) {
    std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str());
    return 1;
  }
  cohort::comm::g_runtime = runtime->get();
  if (runtime.value()->world_rank() != 0) {
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  }
  const int result = RUN_ALL_TESTS();
  runtime.value().reset();
  return result;
}
