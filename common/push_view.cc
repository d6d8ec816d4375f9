// PushView of a protobuf PushRequest: the in-process path to Shard::Push.
#include "common/push_view.h"

namespace downpour::wire {

PushView ViewOf(const proto::PushRequest& request) {
  PushView view;
  view.placement_epoch = request.placement_epoch();
  view.worker_id = request.worker_id();
  view.sequence = request.sequence();
  view.clock = request.clock();
  view.push_key = request.push_key();
  view.blocks.reserve(request.blocks_size());
  for (const proto::BlockData& b : request.blocks()) {
    view.blocks.push_back({b.block_id(), b.version(), b.encoding(),
                           b.data().data(), b.data().size()});
  }
  return view;
}

}  // namespace downpour::wire
