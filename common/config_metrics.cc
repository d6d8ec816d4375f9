// The `metrics` section's keys.
#include "common/config_metrics.h"

#include "common/config_field.h"

namespace downpour::config_internal {

std::vector<ConfigField> MetricsKeys(MetricsSection* m) {
  return {
      IntField("metrics.port_offset", &m->port_offset, Between(-65535, 65535))};
}

}  // namespace downpour::config_internal
