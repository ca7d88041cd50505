// ModelRegistry: the model files this node offers the cluster. It resolves what a user names
// (a GGUF path on this node, or the name of a model the cluster already knows), reads the
// file's shape once, registers it in the agreed state under its file stem, and remembers
// each file's SHA-256 by (size, mtime) so a multi-GB file is hashed once. The node's worker
// service reads the verified files (sha256 -> path) to use them without hashing again.
//
// What a client names through the API is untrusted (RequestedFile): only files under the
// models directory and those named on the command line are offered, by name; a path outside,
// a symlink leading out, anything but a regular file, and a file without a GGUF header are
// refused after reading at most its first bytes, and no answer echoes a resolved path or a
// byte of the file.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cluster/cluster_node.h"
#include "cluster/instance.h"
#include "core/log.h"
#include "core/status.h"

namespace cohort::cluster {

struct ModelRegistryOptions {
  std::string models_dir;                 // files under it are offered by name ("": none)
  std::vector<std::string> command_line;  // files the operator named (-m), offered too
};

class ModelRegistry {
 public:
  // Borrowed: `node` and `log` outlive the registry.
  ModelRegistry(ClusterNode& node, Logger& log, ModelRegistryOptions options = {})
      : node_(node), log_(log), options_(std::move(options)) {}

  // The canonical path of the local file a client's `requested` model names, if this node
  // offers it: a command-line file (as given, or its name), or a file under the models
  // directory (its name, with or without ".gguf", or a path inside). kNotFound when no such
  // file is offered here (it may still be a model the cluster knows by name);
  // kInvalidArgument when the name or the file is refused. The file is opened without
  // blocking and only its first bytes are read.
  Result<std::string> RequestedFile(const std::string& requested) const;

  // The cluster's entry for `path_or_name`: a regular file on this node is hashed, read and
  // registered (or matched with the entry of the same name and digest); anything else must be
  // a registered model's name. kInvalidArgument when another file holds that name.
  Result<ModelEntry> Resolve(const std::string& path_or_name);

  // Of the models registered in `state`, the files this node holds with the registered
  // digest (sha256 -> path); remembered for KnownFiles().
  std::map<std::string, std::string> HeldFiles(const Records& records);
  // The last HeldFiles(), for the worker service's threads.
  std::map<std::string, std::string> KnownFiles() const;

  // The SHA-256 (hex) of the regular file at `path`, hashed again only when its size or
  // modification time changed.
  Result<std::string> Sha256Of(const std::string& path);

 private:
  Result<ModelEntry> ReadEntry(const std::string& path);

  ClusterNode& node_;
  Logger& log_;
  const ModelRegistryOptions options_;
  mutable std::mutex mutex_;
  std::map<std::string, std::pair<std::string, std::string>> hashes_;  // path -> (stamp, sha256)
  std::map<std::string, std::string> known_files_;                     // sha256 -> path
};

}  // namespace cohort::cluster
