// Barrier: returns on a rank only once every rank has entered it.
#pragma once

#include "comm/communicator.h"

namespace cohort::comm {

Status Barrier(Communicator& comm, const CollectiveOptions& options = {});

}  // namespace cohort::comm
