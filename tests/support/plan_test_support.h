// Shared by the ledger tests that read one row of a memory plan.
#pragma once

#include <string>

#include "train/ledger/memory_plan.h"

namespace ledgerlm::testing {

// The plan's component named `name`, or nullptr when it has none.
inline const PlanComponent* plan_component(const MemoryPlan& p, const std::string& name) {
  for (const auto& c : p.components)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace ledgerlm::testing
