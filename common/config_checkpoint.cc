// The `checkpoint` section's keys.
#include "common/config_checkpoint.h"

#include "common/config_field.h"

namespace downpour::config_internal {

std::vector<ConfigField> CheckpointKeys(CheckpointSection* c) {
  return {StringField("checkpoint.dir", &c->dir),
          DoubleField("checkpoint.interval_s", &c->interval_s,
                      NonNegativeAtMost(kMaxSeconds)),
          IntField("checkpoint.keep", &c->keep, {1, 100}),
          BoolField("checkpoint.incremental", &c->incremental),
          IntField("checkpoint.full_every", &c->full_every, {1, 1000})};
}

}  // namespace downpour::config_internal
