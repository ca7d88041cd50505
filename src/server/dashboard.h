// The dashboard: a page every node serves at `/` (index.html, app.js, style.css under
// src/server/dashboard/), compiled into the binary by cmake/EmbedFiles.cmake, so nothing is
// read from disk or fetched from elsewhere at run time. The page is static and carries no
// secret, so it is served without an API key; everything it shows it reads from the JSON
// routes (/v1/cluster, /v1/instances, /v1/plan, /metrics, /v1/chat/completions), with the
// key the user types into it.
#pragma once

#include <cstddef>
#include <string_view>

#include "server/http_server.h"

namespace cohort::server {

// One embedded file: its path under dashboard/ and its bytes (kEmbeddedFiles, generated).
struct EmbeddedFile {
  const char* path;
  const unsigned char* data;
  size_t size;
};
extern const EmbeddedFile kEmbeddedFiles[];
extern const int kEmbeddedFileCount;

// The embedded file at `path` ("index.html", ...), or nullptr.
const EmbeddedFile* FindEmbeddedFile(std::string_view path);

// Serves GET / (index.html) and GET /dashboard/FILE for every embedded file, each open to
// callers without a key. Call before the server starts.
void MountDashboard(HttpServer& server);

}  // namespace cohort::server
