// SVG line charts. Coordinates are computed in plain doubles and written with
// fixed precision; every chart is a <g> translated to its grid cell.
#include "tools/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace downpour::tools {
namespace {

constexpr double kChartWidth = 560;
constexpr double kChartHeight = 340;
constexpr double kLeft = 72, kRight = 18, kTop = 34, kBottom = 48;
constexpr double kTitleHeight = 44;

// Distinct colours (Tableau 10), cycled.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                    "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                    "#9c755f", "#bab0ac"};

const char* Color(size_t i) {
  return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  bool empty() const { return !(lo <= hi); }
  void Add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
};

// Widens a degenerate range so ticks and scaling work.
Range Padded(Range r, bool margin) {
  if (r.lo == r.hi) {
    const double pad = r.lo == 0 ? 1 : std::abs(r.lo) * 0.1;
    return {r.lo - pad, r.hi + pad};
  }
  if (margin) {
    const double pad = (r.hi - r.lo) * 0.05;
    return {r.lo - pad, r.hi + pad};
  }
  return r;
}

constexpr double kPlotWidth = kChartWidth - kLeft - kRight;
constexpr double kPlotHeight = kChartHeight - kTop - kBottom;

// Maps data coordinates into the plot area of a chart.
struct Scale {
  Range x, y;
  double X(double v) const {
    return kLeft + (v - x.lo) / (x.hi - x.lo) * kPlotWidth;
  }
  double Y(double v) const {
    return kTop + kPlotHeight - (v - y.lo) / (y.hi - y.lo) * kPlotHeight;
  }
};

// The ranges the chart's finite points span, widened and fixed as it asks.
Scale ScaleFor(const Chart& chart, Range x, Range y) {
  if (chart.y_min) y.lo = std::min(y.lo, *chart.y_min);
  if (chart.y_max) y.hi = std::max(y.hi, *chart.y_max);
  Scale scale{Padded(x, false), Padded(y, !chart.y_min && !chart.y_max)};
  if (chart.y_min) scale.y.lo = *chart.y_min;
  if (chart.y_max) scale.y.hi = *chart.y_max;
  return scale;
}

void DrawAxes(const Chart& chart, const Scale& s, std::string* out) {
  for (double t : NiceTicks(s.x.lo, s.x.hi, 6)) {
    absl::StrAppendFormat(
        out,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
        "stroke=\"#e6e6e6\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
        "text-anchor=\"middle\" font-size=\"11\">%s</text>\n",
        s.X(t), kTop, s.X(t), kTop + kPlotHeight, s.X(t),
        kTop + kPlotHeight + 16, FormatTick(t));
  }
  for (double t : NiceTicks(s.y.lo, s.y.hi, 6)) {
    absl::StrAppendFormat(
        out,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
        "stroke=\"#e6e6e6\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
        "text-anchor=\"end\" font-size=\"11\">%s</text>\n",
        kLeft, s.Y(t), kLeft + kPlotWidth, s.Y(t), kLeft - 6, s.Y(t) + 4,
        FormatTick(t));
  }
  absl::StrAppendFormat(out,
                        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                        "font-size=\"12\">%s</text>\n",
                        kLeft + kPlotWidth / 2, kChartHeight - 10,
                        XmlEscape(chart.x_label));
  absl::StrAppendFormat(out,
                        "<text transform=\"translate(16,%.1f) rotate(-90)\" "
                        "text-anchor=\"middle\" font-size=\"12\">%s</text>\n",
                        kTop + kPlotHeight / 2, XmlEscape(chart.y_label));
}

// One series: polylines between gaps (non-finite points), lone points as dots.
void DrawSeries(const Series& series, const Scale& s, const char* color,
                const std::string& clip, std::string* out) {
  std::vector<std::vector<std::pair<double, double>>> runs(1);
  for (const auto& [px, py] : series.points) {
    if (!std::isfinite(px) || !std::isfinite(py)) {
      if (!runs.back().empty()) runs.emplace_back();
      continue;
    }
    runs.back().emplace_back(s.X(px), s.Y(py));
  }
  for (const auto& run : runs) {
    if (run.size() == 1) {
      absl::StrAppendFormat(
          out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n",
          run[0].first, run[0].second, color);
    } else if (run.size() > 1) {
      std::vector<std::string> points;
      for (const auto& [x, y] : run)
        points.push_back(absl::StrFormat("%.1f,%.1f", x, y));
      absl::StrAppendFormat(
          out,
          "<polyline clip-path=\"url(#%s)\" fill=\"none\" stroke=\"%s\" "
          "stroke-width=\"1.6\" points=\"%s\"/>\n",
          clip, color, absl::StrJoin(points, " "));
    }
  }
}

// The legend, over the lines on a light backing so they do not hide it.
void DrawLegend(const Chart& chart, std::string* out) {
  if (chart.series.empty()) return;
  const double left = kLeft + kPlotWidth - 114;
  absl::StrAppendFormat(
      out,
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"108\" height=\"%.1f\" "
      "fill=\"#ffffff\" fill-opacity=\"0.85\" stroke=\"#dddddd\"/>\n",
      left, kTop + 3, 16.0 * chart.series.size() + 4);
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const double y = kTop + 14 + 16 * i;
    absl::StrAppendFormat(
        out,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
        "stroke=\"%s\" stroke-width=\"3\"/>\n<text x=\"%.1f\" "
        "y=\"%.1f\" font-size=\"11\">%s</text>\n",
        left + 4, y - 4, left + 22, y - 4, Color(i), left + 28, y,
        XmlEscape(chart.series[i].name));
  }
}

// One chart in the cell whose top left corner is (ox, oy).
void DrawChart(const Chart& chart, double ox, double oy, std::string* out) {
  absl::StrAppendFormat(out, "<g transform=\"translate(%.1f,%.1f)\">\n", ox,
                        oy);
  absl::StrAppendFormat(
      out,
      "<text x=\"%.1f\" y=\"22\" text-anchor=\"middle\" "
      "font-size=\"15\" font-weight=\"bold\">%s</text>\n"
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
      "fill=\"#ffffff\" stroke=\"#444444\"/>\n",
      kLeft + kPlotWidth / 2, XmlEscape(chart.title), kLeft, kTop, kPlotWidth,
      kPlotHeight);
  Range x, y;
  for (const Series& s : chart.series) {
    for (const auto& [px, py] : s.points) {
      if (!std::isfinite(px) || !std::isfinite(py)) continue;
      x.Add(px);
      y.Add(py);
    }
  }
  if (x.empty()) {
    absl::StrAppendFormat(out,
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                          "fill=\"#888888\">no data yet</text>\n</g>\n",
                          kLeft + kPlotWidth / 2, kTop + kPlotHeight / 2);
    return;
  }
  const Scale scale = ScaleFor(chart, x, y);
  DrawAxes(chart, scale, out);
  const std::string clip = absl::StrFormat("c%.0f_%.0f", ox, oy);
  absl::StrAppendFormat(out,
                        "<clipPath id=\"%s\"><rect x=\"%.1f\" y=\"%.1f\" "
                        "width=\"%.1f\" height=\"%.1f\"/></clipPath>\n",
                        clip, kLeft, kTop, kPlotWidth, kPlotHeight);
  for (size_t i = 0; i < chart.series.size(); ++i) {
    DrawSeries(chart.series[i], scale, Color(i), clip, out);
  }
  DrawLegend(chart, out);
  absl::StrAppend(out, "</g>\n");
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  const double rough = (hi - lo) / std::max(1, target - 1);
  const double magnitude = std::pow(10, std::floor(std::log10(rough)));
  const double residual = rough / magnitude;
  const double step = magnitude * (residual < 1.5 ? 1
                                   : residual < 3 ? 2
                                   : residual < 7 ? 5
                                                  : 10);
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9;
       t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

std::string FormatTick(double value) {
  if (value == 0) return "0";
  if (std::abs(value) >= 1e6 || std::abs(value) < 1e-3) {
    return absl::StrFormat("%.3g", value);
  }
  std::string s = absl::StrFormat("%.4f", value);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderSvg(const std::string& title,
                      const std::vector<Chart>& charts, int columns) {
  columns = std::max(1, columns);
  const int rows = (static_cast<int>(charts.size()) + columns - 1) / columns;
  const double width =
      kChartWidth * std::min<int>(columns, std::max<size_t>(1, charts.size()));
  const double height = kTitleHeight + kChartHeight * rows;
  std::string out = absl::StrFormat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
      "height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n"
      "<text x=\"%.1f\" y=\"28\" text-anchor=\"middle\" font-size=\"18\" "
      "font-weight=\"bold\">%s</text>\n",
      width, height, width, height, width / 2, XmlEscape(title));
  for (size_t i = 0; i < charts.size(); ++i) {
    DrawChart(charts[i], kChartWidth * (i % columns),
              kTitleHeight + kChartHeight * (i / columns), &out);
  }
  absl::StrAppend(&out, "</svg>\n");
  return out;
}

}  // namespace downpour::tools
