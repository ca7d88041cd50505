// NodeId: hex form, random creation and persistence in the state directory.
#include "cluster/node_id.h"

#include <sodium.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cohort::cluster {

bool NodeId::IsZero() const {
  for (uint8_t b : bytes) {
    if (b != 0) return false;
  }
  return true;
}

std::string NodeId::Hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

std::string NodeId::Short() const { return Hex().substr(0, 8); }

Result<NodeId> NodeId::FromHex(const std::string& hex) {
  if (hex.size() != 32) return InvalidArgument("node id must be 32 hex digits");
  NodeId id;
  for (size_t i = 0; i < 16; ++i) {
    int v = 0;
    for (size_t k = 0; k < 2; ++k) {
      const char c = hex[2 * i + k];
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else return InvalidArgument("node id has a non-hex digit");
      v = v * 16 + d;
    }
    id.bytes[i] = static_cast<uint8_t>(v);
  }
  return id;
}

NodeId NodeId::Random() {
  NodeId id;
  // An all-zero id means "none" on the wire, so draw again in the (2^-128) case it comes up.
  do {
    randombytes_buf(id.bytes.data(), id.bytes.size());
  } while (id.IsZero());
  return id;
}

Result<NodeId> LoadOrCreateNodeId(const std::string& state_dir) {
  if (sodium_init() < 0) return Internal("libsodium failed to initialise");
  if (state_dir.empty()) return NodeId::Random();
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  if (ec) return IoError("cannot create state dir " + state_dir + ": " + ec.message());
  const fs::path path = fs::path(state_dir) / "node_id";
  if (fs::exists(path)) {
    std::ifstream in(path);
    std::string hex;
    in >> hex;
    auto id = NodeId::FromHex(hex);
    if (!id.ok()) return Corrupt(path.string() + ": " + id.status().message());
    if (id->IsZero()) return Corrupt(path.string() + ": zero node id");
    return id;
  }
  const NodeId id = NodeId::Random();
  // Write to a temporary name and rename, so a crash never leaves a half-written id behind.
  const fs::path tmp = fs::path(state_dir) / "node_id.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << id.Hex() << "\n";
    if (!out) return IoError("cannot write " + tmp.string());
  }
  fs::rename(tmp, path, ec);
  if (ec) return IoError("cannot rename " + tmp.string() + ": " + ec.message());
  return id;
}

}  // namespace cohort::cluster
