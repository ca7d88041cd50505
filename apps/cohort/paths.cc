// Where the CLI finds its defaults: the demo model and the number of threads.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "commands.h"
#include "core/thread_pool.h"

namespace cohort::app {

std::string DefaultModelPath() {
  namespace fs = std::filesystem;
  const char* kRelative = "models/stories260K.gguf";
  std::error_code ec;
  // Next to the source tree this binary was built from, then relative to the executable
  // (build/<preset>/bin/cohort, or an installed one), then the working directory.
  std::vector<fs::path> candidates = {fs::path(COHORT_SOURCE_DIR) / kRelative};
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path() / "../../.." / kRelative);
  // Installed (the Debian package): <prefix>/bin/cohort and <prefix>/share/cohort/models.
  if (!ec) candidates.push_back(exe.parent_path() / "../share/cohort" / kRelative);
  candidates.push_back(fs::path(kRelative));
  for (const fs::path& p : candidates) {
    if (fs::exists(p, ec)) return p.lexically_normal().string();
  }
  return kRelative;  // Open() then reports it missing by name
}

int DefaultThreads() { return ThreadPool::DefaultThreads(); }

}  // namespace cohort::app
