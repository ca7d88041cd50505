// A node's stable identity: a random 128-bit id created once and kept in the node's state
// directory, so a restarted node is recognised as the same machine.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace cohort::cluster {

struct NodeId {
  std::array<uint8_t, 16> bytes{};

  bool IsZero() const;
  std::string Hex() const;         // 32 lowercase hex digits
  std::string Short() const;       // the first 8 hex digits, for logs
  static Result<NodeId> FromHex(const std::string& hex);
  static NodeId Random();          // libsodium randombytes (sodium_init must have run)
  auto operator<=>(const NodeId&) const = default;
};

// Reads `state_dir`/node_id, or creates the directory and a new random id there. An empty
// state_dir gives a fresh id that is not persisted (tests, throwaway nodes).
Result<NodeId> LoadOrCreateNodeId(const std::string& state_dir);

}  // namespace cohort::cluster
