// The pipeline as an SVG Gantt chart: one block of three lanes (compute, top-k,
// communication) per timeline, on a shared time axis.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include <omgs/plan.hpp>

#include "svg_text.hpp"

namespace omgs {

namespace detail {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
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

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace detail

namespace {
using detail::fmt;
using detail::xml_escape;

/// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `ticks` ticks.
double tick_step(double span, int ticks) {
  const double raw = span / ticks;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

std::string time_label(double s, double step) {
  char buf[32];
  if (step >= 1.0)
    std::snprintf(buf, sizeof buf, "%.0f s", s);
  else if (step >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.*f ms", step >= 1e-2 ? 0 : 1, s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.*f us", step >= 1e-5 ? 0 : 1, s * 1e6);
  return buf;
}

}  // namespace

std::string timeline_svg(const std::vector<LabeledTimeline>& rows, const std::string& title) {
  const double left = 150, right = 30, top = 50, lane_h = 22, lane_gap = 4, block_gap = 34;
  const double width = 1100, plot_w = width - left - right;
  double t_end = 0;
  for (const LabeledTimeline& r : rows) {
    for (const GroupTiming& g : r.timeline.groups)
      t_end = std::max({t_end, g.topk_end_s, g.comm_end_s});
    t_end = std::max(t_end, r.timeline.iteration_end_s);
  }
  if (!(t_end > 0) || !std::isfinite(t_end)) t_end = 1e-3;
  const double scale = plot_w / t_end;
  const double block_h = 3 * lane_h + 2 * lane_gap;
  const double height = top + static_cast<double>(rows.size()) * (block_h + block_gap) + 40;

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(width) << "\" height=\""
    << fmt(height) << "\" viewBox=\"0 0 " << fmt(width) << ' ' << fmt(height)
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << fmt(left) << "\" y=\"22\" font-size=\"14\" font-weight=\"bold\">"
    << xml_escape(title) << "</text>\n";

  // Time axis (grid lines through every block).
  const double step = tick_step(t_end, 10);
  const double axis_y = height - 30;
  for (double t = 0; t <= t_end * (1 + 1e-9); t += step) {
    const double x = left + t * scale;
    o << "<line x1=\"" << fmt(x) << "\" y1=\"" << fmt(top - 6) << "\" x2=\"" << fmt(x) << "\" y2=\""
      << fmt(axis_y) << "\" stroke=\"#ddd\"/>\n";
    o << "<text x=\"" << fmt(x) << "\" y=\"" << fmt(axis_y + 14)
      << "\" text-anchor=\"middle\" fill=\"#444\">" << time_label(t, step) << "</text>\n";
  }

  const char* lane_names[3] = {"compute", "top-k", "communication"};
  const char* colors[3] = {"#8fb3de", "#f2a65a", "#7cc47f"};
  for (std::size_t b = 0; b < rows.size(); ++b) {
    const LabeledTimeline& r = rows[b];
    const double y0 = top + static_cast<double>(b) * (block_h + block_gap);
    char summary[160];
    std::snprintf(summary, sizeof summary,
                  "  (%zu groups; iteration %.3f ms, communication not hidden %.3f ms)",
                  r.timeline.groups.size(), r.timeline.iteration_end_s * 1e3,
                  r.timeline.non_overlapped_comm_s * 1e3);
    o << "<text x=\"" << fmt(left) << "\" y=\"" << fmt(y0 - 8) << "\" font-weight=\"bold\">"
      << xml_escape(r.label) << "<tspan font-weight=\"normal\" fill=\"#555\">" << summary
      << "</tspan></text>\n";
    for (int lane = 0; lane < 3; ++lane) {
      const double y = y0 + lane * (lane_h + lane_gap);
      o << "<text x=\"" << fmt(left - 8) << "\" y=\"" << fmt(y + lane_h * 0.7)
        << "\" text-anchor=\"end\">" << lane_names[lane] << "</text>\n";
      o << "<rect x=\"" << fmt(left) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(plot_w)
        << "\" height=\"" << fmt(lane_h) << "\" fill=\"#f7f7f7\"/>\n";
    }
    for (std::size_t g = 0; g < r.timeline.groups.size(); ++g) {
      const GroupTiming& t = r.timeline.groups[g];
      const double spans[3][2] = {{t.backward_start_s, t.topk_start_s},
                                  {t.topk_start_s, t.topk_end_s},
                                  {t.comm_start_s, t.comm_end_s}};
      for (int lane = 0; lane < 3; ++lane) {
        const double a = spans[lane][0], e = spans[lane][1];
        if (!(e >= a) || !std::isfinite(a) || !std::isfinite(e)) continue;
        const double x = left + a * scale, w = std::max(0.5, (e - a) * scale);
        const double y = y0 + lane * (lane_h + lane_gap);
        o << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(y + 1) << "\" width=\"" << fmt(w)
          << "\" height=\"" << fmt(lane_h - 2) << "\" fill=\"" << colors[lane]
          << "\" stroke=\"#333\" stroke-width=\"0.4\"><title>group " << g << ' ' << lane_names[lane]
          << ": " << time_label(a, 1e-6) << " .. " << time_label(e, 1e-6) << "</title></rect>\n";
        if (w >= 18)
          o << "<text x=\"" << fmt(x + w / 2) << "\" y=\"" << fmt(y + lane_h * 0.7)
            << "\" text-anchor=\"middle\" font-size=\"10\">" << g << "</text>\n";
      }
    }
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace omgs
