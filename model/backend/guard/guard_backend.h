// The guard backend, for tests: the CPU backend whose buffers are inaccessible (PROT_NONE)
// except while one of its own methods runs. Host code that dereferences backend memory instead
// of using the backend's copies faults at once — so a test suite passing on it proves, on any
// CPU, that nothing outside the backend touches backend buffers (what a device backend needs).
// It reports its memory as device memory, so callers take the paths a device backend takes
// (staging through host copies, MPI through host buffers).
//
// backend_create("guard"), or backend_create("cpu") with LEDGERLM_TEST_GUARD_BACKEND=1 in the
// environment (a test hook: whole command-line test suites run on it unchanged).
#pragma once

#include <memory>

#include "model/backend/backend.h"

namespace ledgerlm {

std::unique_ptr<Backend> backend_create_guard(int threads);

}  // namespace ledgerlm
