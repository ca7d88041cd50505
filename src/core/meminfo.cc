// ParseMeminfo and ReadMeminfo; see meminfo.h.
#include "core/meminfo.h"

#include <fstream>
#include <sstream>

namespace cohort {

Status ParseMeminfo(const std::string& text, double* total_bytes, double* available_bytes) {
  std::istringstream in(text);
  std::string line;
  bool have_total = false, have_available = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key, unit;
    double value = 0;
    if (!(fields >> key >> value)) continue;
    fields >> unit;
    const double scale = unit == "kB" ? 1024.0 : 1.0;
    if (key == "MemTotal:") {
      *total_bytes = value * scale;
      have_total = true;
    } else if (key == "MemAvailable:") {
      *available_bytes = value * scale;
      have_available = true;
    }
  }
  if (!have_total || !have_available) return Corrupt("meminfo lacks MemTotal or MemAvailable");
  return Status::Ok();
}

Status ReadMeminfo(double* total_bytes, double* available_bytes) {
  std::ifstream in("/proc/meminfo");
  if (!in) return IoError("cannot read /proc/meminfo");
  std::stringstream text;
  text << in.rdbuf();
  return ParseMeminfo(text.str(), total_bytes, available_bytes);
}

}  // namespace cohort
