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
  view.reply_values = request.reply_values();
  view.blocks.reserve(request.blocks_size());
  for (const proto::BlockData& b : request.blocks()) {
    view.blocks.push_back({b.block_id(), b.version(), b.encoding(),
                           b.data().data(), b.data().size()});
  }
  view.sparse.reserve(request.sparse_size());
  for (const proto::SparseRows& rows : request.sparse()) {
    view.sparse.push_back({rows.table(), rows.keys().data(), rows.keys().size(),
                           rows.values().data(), rows.values().size(),
                           rows.counts().data(), rows.counts().size()});
  }
  return view;
}

}  // namespace downpour::wire
