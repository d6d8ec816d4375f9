// Line charts as a standalone SVG document, written by our own code (no
// plotting library): axes with round-number ticks, a grid, one coloured
// polyline per series and a legend. Opens in any browser or image viewer.
//
//   Chart chart{"Training loss", "seconds", "loss"};
//   chart.series.push_back({"worker 0", {{0, 2.3}, {1, 0.9}, {2, 0.5}}});
//   std::string svg = RenderSvg("Downpour run", {chart}, /*columns=*/2);
#ifndef DOWNPOUR_TOOLS_SVG_PLOT_H_
#define DOWNPOUR_TOOLS_SVG_PLOT_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace downpour::tools {

struct Series {
  std::string name;
  // (x, y) in drawing order; a non-finite y breaks the line there.
  std::vector<std::pair<double, double>> points;
};

struct Chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  // Fixed y range ends; unset ends follow the data (with a small margin).
  std::optional<double> y_min;
  std::optional<double> y_max;
};

// One SVG document: `title` on top, then the charts row by row, `columns` per
// row (>= 1). A chart without any finite point says "no data yet".
std::string RenderSvg(const std::string& title,
                      const std::vector<Chart>& charts, int columns);

// About `target` round tick values (steps of 1, 2 or 5 times a power of ten)
// within [lo, hi]. REQUIRES: lo < hi, target >= 2.
std::vector<double> NiceTicks(double lo, double hi, int target);

// A tick label: "0", "0.25", "1500", "2e+06".
std::string FormatTick(double value);

// Text safe inside SVG/XML.
std::string XmlEscape(const std::string& text);

}  // namespace downpour::tools

#endif  // DOWNPOUR_TOOLS_SVG_PLOT_H_
