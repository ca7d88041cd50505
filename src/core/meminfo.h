// The system's memory as /proc/meminfo reports it: total and available (the memory the kernel
// could give a process now without swapping).
#pragma once

#include <string>

#include "core/status.h"

namespace cohort {

// Reads MemTotal and MemAvailable (bytes) from text in /proc/meminfo's format.
Status ParseMeminfo(const std::string& text, double* total_bytes, double* available_bytes);

// ParseMeminfo of this machine's /proc/meminfo.
Status ReadMeminfo(double* total_bytes, double* available_bytes);

}  // namespace cohort
