// The training curves `psctl plot` and the launcher draw from the coordinator's
// metrics history: per worker, training loss and test accuracy against time and
// against its step; throughput per worker and for the cluster; updates per
// second on each ps; staleness p99 of each worker and ps.
#ifndef DOWNPOUR_TOOLS_TRAINING_PLOT_H_
#define DOWNPOUR_TOOLS_TRAINING_PLOT_H_

#include <string>
#include <vector>

#include "proto/coordinator.pb.h"
#include "tools/svg_plot.h"

namespace downpour::tools {

// Seven charts, in this order: loss vs time, accuracy vs time, loss vs step,
// accuracy vs step, examples/s vs time, ps pushes/s vs time, staleness p99
// (since start, MemberReport.staleness_p99) of every worker and ps vs time,
// from a member's first push on. With a sparse model two more: rows held per
// ps, and keys pushed and pulled per second per ps. Time is seconds
// since the coordinator started. A worker's point is left out until it has
// reported (step > 0) and while its figures repeat unchanged (a dead or
// finished worker's line just ends); unknown accuracy is left out.
std::vector<Chart> TrainingCharts(const proto::GetHistoryResponse& history);

// TrainingCharts as one SVG document, two charts per row, under a title that
// says how many workers and ps and how long the history covers.
std::string TrainingPlotSvg(const proto::GetHistoryResponse& history);

}  // namespace downpour::tools

#endif  // DOWNPOUR_TOOLS_TRAINING_PLOT_H_
