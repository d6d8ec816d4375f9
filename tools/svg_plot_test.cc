#include "tools/svg_plot.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::tools {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1))
    ++n;
  return n;
}

TEST(NiceTicksTest, RoundSteps) {
  EXPECT_THAT(NiceTicks(0, 1, 6),
              ElementsAre(0, 0.2, 0.4, 0.6000000000000001, 0.8, 1));
  EXPECT_THAT(NiceTicks(0, 100, 6), ElementsAre(0, 20, 40, 60, 80, 100));
  EXPECT_THAT(NiceTicks(3, 17, 4), ElementsAre(5, 10, 15));
  EXPECT_THAT(NiceTicks(-1, 1, 3), ElementsAre(-1, 0, 1));
}

TEST(FormatTickTest, Compact) {
  EXPECT_EQ(FormatTick(0), "0");
  EXPECT_EQ(FormatTick(0.25), "0.25");
  EXPECT_EQ(FormatTick(1500), "1500");
  EXPECT_EQ(FormatTick(2e6), "2e+06");
  EXPECT_EQ(FormatTick(0.6000000000000001), "0.6");
}

TEST(XmlEscapeTest, EscapesMarkup) {
  EXPECT_EQ(XmlEscape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
}

TEST(RenderSvgTest, OneLinePerSeriesWithLegendAndAxes) {
  Chart chart{"Loss <train>", "seconds", "loss"};
  chart.series.push_back({"worker 0", {{0, 2.3}, {1, 1.0}, {2, 0.5}}});
  chart.series.push_back(
      {"worker 1", {{0, 2.2}, {1, NAN}, {2, 0.4}, {3, 0.3}}});
  const std::string svg = RenderSvg("Run & curves", {chart}, 2);
  EXPECT_THAT(svg, HasSubstr("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_THAT(svg, HasSubstr("Run &amp; curves"));
  EXPECT_THAT(svg, HasSubstr("Loss &lt;train&gt;"));
  EXPECT_THAT(svg, HasSubstr(">worker 0<"));
  EXPECT_THAT(svg, HasSubstr(">worker 1<"));
  // worker 0: one polyline; worker 1: a lone point, then a polyline after the
  // gap.
  EXPECT_EQ(Count(svg, "<polyline"), 2);
  EXPECT_EQ(Count(svg, "<circle"), 1);
  EXPECT_THAT(svg, Not(HasSubstr("nan")));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
}

TEST(RenderSvgTest, EmptyChartSaysNoData) {
  Chart chart{"Accuracy", "step", "accuracy"};
  chart.series.push_back({"worker 0", {{0, NAN}}});
  const std::string svg = RenderSvg("t", {chart, chart, chart}, 2);
  EXPECT_EQ(Count(svg, "no data yet"), 3);
  EXPECT_THAT(svg, HasSubstr("height=\"724\""));  // title + two rows
}

TEST(RenderSvgTest, FlatSeriesStillScales) {
  Chart chart{"Flat", "x", "y"};
  chart.series.push_back({"s", {{1, 5}, {1, 5}}});
  const std::string svg = RenderSvg("t", {chart}, 1);
  EXPECT_THAT(svg, Not(HasSubstr("nan")));
  EXPECT_THAT(svg, Not(HasSubstr("inf")));
}

}  // namespace
}  // namespace downpour::tools
