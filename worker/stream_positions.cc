#include "worker/stream_positions.h"

namespace downpour::worker {

std::vector<PartProgress> ProgressOf(const proto::Partition& partition) {
  std::vector<int> parts(partition.parts().begin(), partition.parts().end());
  if (parts.empty()) parts.push_back(partition.part());
  std::vector<PartProgress> out;
  for (const int part : parts) {
    PartProgress p;
    p.part = part;
    for (const proto::PartPosition& saved : partition.positions()) {
      if (saved.part() != part) continue;
      p.position.segment = saved.segment();
      p.position.offset = saved.offset();
      p.epoch = saved.epoch();
      p.examples = saved.examples();
    }
    out.push_back(p);
  }
  return out;
}

void AddStreamReport(const StreamingBatches& stream, const WorkerStats& stats,
                     proto::MemberReport* report) {
  for (const PartProgress& p : stream.Positions()) {
    proto::PartPosition* position = report->add_positions();
    position->set_part(p.part);
    position->set_segment(p.position.segment);
    position->set_offset(p.position.offset);
    position->set_epoch(p.epoch);
    position->set_examples(p.examples);
  }
  for (const int64_t examples : stats.epoch_examples) {
    report->add_epoch_examples(examples);
  }
  report->set_data_bytes_read(stream.bytes_read());
  report->set_data_bytes_total(stream.bytes_total());
}

}  // namespace downpour::worker
