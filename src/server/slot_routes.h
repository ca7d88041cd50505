// Slot save and restore, as llama-server's --slot-save-path routes: GET /slots lists the
// slots; POST /slots/{id}?action=save with {"filename": "x.bin"} writes what slot id's last
// request left in the prefix cache (its rows, and a hybrid model's state checkpoints) to that
// file of the save directory, action=restore puts a file's blocks back into the prefix cache
// (so the next request starting with those tokens reports them as cached_tokens), and
// action=erase drops the slot's prefix from the cache. The file format (engine/prefix_file.h)
// names the model, KV type and block size it is valid for; a file that does not match, is
// truncated or altered gets 400 and changes nothing. File names are plain names inside the
// directory (letters, digits, '.', '_', '-', not starting with '.'), opened without following
// symbolic links. Registered on the HttpServer, so they sit behind its API-key check.
#pragma once

#include <string>
#include <string_view>

#include "engine/serving.h"
#include "server/http_server.h"

namespace cohort::server {

// Borrowed: `instance` outlives `server`. An empty `save_dir` leaves GET /slots only (the
// POST actions answer 501, as llama-server's without --slot-save-path).
void AddSlotRoutes(HttpServer& server, engine::ServingInstance& instance, const std::string& save_dir);

// A name AddSlotRoutes accepts for a file of the save directory.
bool ValidSlotFileName(std::string_view name);

}  // namespace cohort::server
