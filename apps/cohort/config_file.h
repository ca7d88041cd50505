// `cohort serve|worker|node --config FILE`: a TOML file whose keys are the command's long flag names
// (`port = 8080`, `cluster = true`, `peers = "10.0.0.2:7946"`, `api-key = ["k1", "k2"]`),
// read with Debian's toml11 into CLI11's configuration items. What wins: a flag on the
// command line, then its COHORT_* environment variable (COHORT_PORT, COHORT_API_KEY, ...),
// then the file, then the default.
#pragma once

#include <vector>

namespace CLI {
class App;
}

namespace cohort::app {

// Adds --config (for the options of whichever of `commands` runs) to `app`, and an environment
// variable COHORT_<FLAG> to each option of `app` and `commands`.
void AddConfigFile(CLI::App* app, const std::vector<CLI::App*>& commands);

}  // namespace cohort::app
