// An MPI call's return code checked: anything but MPI_SUCCESS is an Error naming the call and
// giving MPI's own words. The MPI Comm, its gate and the gate's arrival barrier check every call
// this way.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>

#include "model/base/check.h"

namespace ledgerlm {

inline void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(error_message("MPI ", what, " failed: ", std::string(text, static_cast<size_t>(len))));
}

}  // namespace ledgerlm
