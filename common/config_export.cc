// The `export` section's keys.
#include "common/config_export.h"

#include "common/config_field.h"

namespace downpour::config_internal {

std::vector<ConfigField> ExportKeys(ExportSection* e) {
  return {DoubleField("export.interval_s", &e->interval_s,
                      NonNegativeAtMost(86400))};
}

}  // namespace downpour::config_internal
