// The `coordinator` section's keys.
#include "common/config_coordinator.h"

#include "common/config_field.h"

namespace downpour::config_internal {

std::vector<ConfigField> CoordinatorKeys(CoordinatorSection* c) {
  return {StringField("coordinator.state_dir", &c->state_dir),
          IntField("coordinator.history_size", &c->history_size,
                   Between(1, 1'000'000)),
          DoubleField("coordinator.history_interval_s", &c->history_interval_s,
                      {0.01, false, 3600, false})};
}

}  // namespace downpour::config_internal
