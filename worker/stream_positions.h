// The streamed data's side of the worker's talk with the coordinator: the
// parts and positions a Partition hands the worker, and what its heartbeat
// reports (each part's position, the examples trained by epoch, the bytes
// read of all it will read).
#ifndef DOWNPOUR_WORKER_STREAM_POSITIONS_H_
#define DOWNPOUR_WORKER_STREAM_POSITIONS_H_

#include <vector>

#include "proto/coordinator.pb.h"
#include "worker/sparse_stream.h"
#include "worker/training_loop.h"

namespace downpour::worker {

// Each part of `partition` (its own part when it lists none) with its saved
// position, or from the start when it has none.
std::vector<PartProgress> ProgressOf(const proto::Partition& partition);

// Adds the stream's positions and bytes, and the stats' examples by epoch,
// to `report`.
void AddStreamReport(const StreamingBatches& stream, const WorkerStats& stats,
                     proto::MemberReport* report);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_STREAM_POSITIONS_H_
