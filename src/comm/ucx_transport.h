// The UCX transport: tagged messages through UCX (Debian libucx-dev), which drives RDMA
// (InfiniBand, RoCE) where the hardware exists and falls back to shared memory and TCP where
// it does not, so the code path of an RDMA cluster is the one exercised on any machine. Built
// only when pkg-config finds UCX (COHORT_HAVE_UCX).
//
// Ranks bootstrap over a TCP mesh (same addresses and hello as the TCP transport) to swap UCX
// worker addresses; those sockets then stay open, idle, as a liveness line: a peer that closes
// or dies shows up as end-of-file on them within milliseconds, whatever UCX's own keepalive
// says. UCX reads its usual UCX_* environment variables (e.g. UCX_TLS=rc,sm,self to insist on
// RDMA; UCX_NET_DEVICES=mlx5_0:1 to pick the port).
#pragma once

#include <memory>

#include "comm/tcp_transport.h"
#include "comm/transport.h"
#include "core/status.h"

namespace cohort::comm {

struct UcxOptions {
  TcpOptions bootstrap;  // rank, addresses, group id, connect timeout
  // Like TCP, UCX is fastest when it sleeps on its event fd at once (measured on loopback,
  // 16 KB: 24 µs without yielding, 33 µs with the shared-memory default).
  WaitPolicy wait{.spin_us = 0, .yield_us = 0};
};

Result<std::unique_ptr<Transport>> ConnectUcxGroup(const UcxOptions& options,
                                                   std::unique_ptr<TcpListener> listener = nullptr);

}  // namespace cohort::comm
