// MountDashboard; see dashboard.h.
#include "server/dashboard.h"

#include <httplib.h>

#include <string>

namespace cohort::server {
namespace {

const char* ContentTypeOf(std::string_view path) {
  if (path.ends_with(".html")) return "text/html; charset=utf-8";
  if (path.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (path.ends_with(".css")) return "text/css; charset=utf-8";
  return "application/octet-stream";
}

void Serve(const EmbeddedFile& file, httplib::Response& res) {
  res.set_content(reinterpret_cast<const char*>(file.data), file.size, ContentTypeOf(file.path));
  // The page's own files only, no inline script or outside origin: a page that cannot be
  // made to run foreign code, even if a node name or a model path carried markup.
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                 "frame-ancestors 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Cache-Control", "no-cache");
}

}  // namespace

const EmbeddedFile* FindEmbeddedFile(std::string_view path) {
  for (int i = 0; i < kEmbeddedFileCount; ++i) {
    if (path == kEmbeddedFiles[i].path) return &kEmbeddedFiles[i];
  }
  return nullptr;
}

void MountDashboard(HttpServer& server) {
  const EmbeddedFile* index = FindEmbeddedFile("index.html");
  if (index != nullptr) {
    server.AddOpenPath("/");
    server.routes().Get("/", [index](const httplib::Request&, httplib::Response& res) { Serve(*index, res); });
  }
  for (int i = 0; i < kEmbeddedFileCount; ++i) {
    const EmbeddedFile* file = &kEmbeddedFiles[i];
    const std::string path = std::string("/dashboard/") + file->path;
    server.AddOpenPath(path);
    server.routes().Get(path, [file](const httplib::Request&, httplib::Response& res) { Serve(*file, res); });
  }
}

}  // namespace cohort::server
