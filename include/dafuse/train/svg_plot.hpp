// SPDX-License-Identifier: Apache-2.0
//! @file train/svg_plot.hpp
//! @brief `write_svg`: a training_curves table drawn as a self-contained SVG plot.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/file.hpp>
#include <dafuse/train/curves.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dafuse {

//! Tick marks of one axis: multiples of `step`, which is 1, 2 or 5 × 10^k.
struct axis_ticks {
  double step = 0;             //!< spacing between neighbouring ticks
  std::vector<double> values;  //!< ascending; first ≤ the range's low end, last ≥ its high end
};

//! One panel of an SVG plot: a set of series drawn against step on shared axes.
struct svg_panel {
  std::string title{};                 //!< above the panel; empty: the column names, joined
  std::vector<std::string> columns{};  //!< the series; names not in the table are skipped
};

//! A step marked across every panel by a dashed vertical line, labelled in the first panel
//! (e.g. the step a validator selected).
struct svg_marker {
  double step = 0;      //!< where, on the step axis (a finite value)
  std::string label{};  //!< beside the line's top; empty: none
};

//! What `write_svg` draws. Panels stack vertically and share the step axis.
//! (The `{}` initializers let designated initializers name any subset of members without
//! g++'s -Wmissing-field-initializers.)
struct svg_layout {
  std::string title{};                //!< above all panels; empty: none
  std::vector<svg_panel> panels{};    //!< empty: one panel per column except step
  std::vector<svg_marker> markers{};  //!< steps marked in every panel
  int width = 960;                    //!< pixels, at least 320
  int panel_height = 260;             //!< pixels per panel, at least 140
};

namespace detail::curves {

//! `v` with `precision` significant digits, like printf's %g (trailing zeros dropped).
inline void append_general(std::string& out, double v, int precision) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, precision);
  out.append(buf, r.ptr);
}

//! A pixel coordinate: two decimals (a hundredth of a pixel is below what any renderer shows),
//! trailing zeros dropped to keep long polylines short.
inline void append_coordinate(std::string& out, double v) {
  char buf[48];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 2);
  std::string_view s(buf, std::size_t(r.ptr - buf));
  while (s.back() == '0') s.remove_suffix(1);
  if (s.back() == '.') s.remove_suffix(1);
  out.append(s == "-0" ? std::string_view("0") : s);
}

//! XML character data (text or an attribute value): &, <, >, " and ' escaped; control characters
//! XML 1.0 forbids and bytes that are not UTF-8 become U+FFFD, since one bad byte makes a browser
//! refuse the whole file.
inline void append_xml_text(std::string& out, std::string_view s) {
  constexpr std::string_view replacement = "\xEF\xBF\xBD";
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
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
        case '\'':
          out += "&apos;";
          break;
        default:
          if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
            out += replacement;
          else
            out += char(c);
      }
      ++i;
      continue;
    }
    // Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
    const std::size_t n = (c >= 0xC2 && c <= 0xDF)   ? 2
                          : (c >= 0xE0 && c <= 0xEF) ? 3
                          : (c >= 0xF0 && c <= 0xF4) ? 4
                                                     : 0;
    bool ok = n != 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k)
      ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
          (c == 0xF4 && c1 > 0x8F))
        ok = false;
      if (n == 3 && c == 0xEF && c1 == 0xBF && static_cast<unsigned char>(s[i + 2]) >= 0xBE)
        ok = false;  // U+FFFE and U+FFFF are not XML characters
    }
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += replacement;
      ++i;
    }
  }
}

//! `s` cut to at most `most` characters (UTF-8 code points), "…" marking a cut.
inline std::string truncated(std::string_view s, std::size_t most) {
  std::size_t points = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;
    if (++points > most) return std::string(s.substr(0, i)) + "\xE2\x80\xA6";
  }
  return std::string(s);
}

// matplotlib's "tab10" palette: ten hues that stay apart for the common colour-vision deficiencies
// better than a hue wheel. Beyond ten series in one panel the colours repeat with a dash pattern.
inline constexpr std::array<std::string_view, 10> palette = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
inline constexpr std::array<std::string_view, 4> dashes = {"", "6 3", "2 3", "8 3 2 3"};

// Values beyond this are clamped before axis arithmetic, so ranges and tick values stay finite.
inline constexpr double axis_limit = 1e300;

//! Maps [lo, hi] linearly onto [from, to] (to < from for a y axis, which points down in SVG).
struct axis_map {
  double lo, hi, from, to;
  double operator()(double v) const {
    v = std::clamp(v, lo, hi);
    return from + (v - lo) / (hi - lo) * (to - from);
  }
};

}  // namespace detail::curves

//! Ticks for an axis over [lo, hi]: nice values (multiples of 1, 2 or 5 × 10^k), the first at or
//! below lo and the last at or above hi (to within 1e-9 of a step), 4 to 6 of them — or 3 or 7
//! where no 1-2-5 step gives 4 to 6 (for [5.1, 14.9], a step of 5 gives 3 ticks and 2 gives 7).
//! Among steps giving 4 to 6 it picks the one whose ticks waste least of the axis.
//! An empty range (lo == hi, or narrower than 1e-12 of its magnitude, where 17 digits cannot
//! label ticks apart) is widened by 10% of |lo| each side, or to [-1, 1] around 0, so a constant
//! series still gets an axis. Ends beyond ±1e300 are clamped so tick arithmetic stays finite.
inline axis_ticks nice_ticks(double lo, double hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    std::string found;
    detail::curves::append_number(found, lo);
    found += ", ";
    detail::curves::append_number(found, hi);
    fail("nice_ticks", "lo, hi", "finite numbers", found);
  }
  if (lo > hi) std::swap(lo, hi);
  lo = std::clamp(lo, -detail::curves::axis_limit, detail::curves::axis_limit);
  hi = std::clamp(hi, -detail::curves::axis_limit, detail::curves::axis_limit);
  const double scale = std::max(std::abs(lo), std::abs(hi));
  if (hi - lo <= std::max(scale * 1e-12, 1e-200)) {
    const double mid = lo / 2 + hi / 2;
    const double half = std::abs(mid) >= 1e-190 ? std::abs(mid) * 0.1 : 1.0;
    lo = mid - half;
    hi = mid + half;
  }
  const double range = hi - lo;

  // A step m × 10^e; tick i is i·m·10^e, computed as (i·m) / 10^-e for e < 0 so that 0.3 is the
  // double nearest 0.3 rather than 3 × 0.1 = 0.30000000000000004.
  auto tick = [](double i, double m, int e) {
    const double p = std::pow(10.0, std::abs(e));
    return (e >= 0 ? i * m * p : i * m / p) + 0.0;  // + 0.0 turns -0 into 0
  };
  struct candidate {
    double m = 0;
    int e = 0;
    double first = 0, last = 0;  // tick indices
    bool valid = false;          // 4 to 6 ticks
    double waste = 0;            // share of the tick span outside [lo, hi]
    double off = 0;              // |ticks − 5|
  };
  std::optional<candidate> best;
  const int e0 = static_cast<int>(std::floor(std::log10(range)));
  for (int e = e0 - 2; e <= e0 + 1; ++e)
    for (const double m : {1.0, 2.0, 5.0}) {
      const double step = tick(1, m, e);
      candidate c{m, e, std::floor(lo / step + 1e-9), std::ceil(hi / step - 1e-9)};
      const double count = c.last - c.first + 1;
      if (count < 2 || count > 50) continue;
      c.valid = count >= 4 && count <= 6;
      c.waste = 1 - range / ((c.last - c.first) * step);
      c.off = std::abs(count - 5);
      const bool better =
          !best ||
          (c.valid != best->valid
               ? c.valid
               : (c.valid ? (c.waste < best->waste - 1e-12 ||
                             (c.waste <= best->waste + 1e-12 && c.off < best->off))
                          : (c.off < best->off || (c.off == best->off && c.waste < best->waste))));
      if (better) best = c;
    }
  // `best` is set: range / 10^(e0+1) lies in [0.1, 1), so that step gives 2 or 3 ticks.
  axis_ticks out;
  out.step = tick(1, best->m, best->e);
  for (double i = best->first; i <= best->last; ++i)
    out.values.push_back(tick(i, best->m, best->e));
  return out;
}

namespace detail::curves {

struct resolved_panel {
  std::string title;
  std::vector<std::size_t> columns;
};

inline std::vector<resolved_panel> resolve(const training_curves& t, const svg_layout& layout) {
  std::vector<resolved_panel> out;
  if (layout.panels.empty()) {
    for (std::size_t c = 1; c < t.columns().size(); ++c) out.push_back({t.columns()[c], {c}});
    return out;
  }
  for (const svg_panel& p : layout.panels) {
    resolved_panel r{p.title, {}};
    for (const std::string& name : p.columns)
      if (const auto c = t.find_column(name);
          c && std::find(r.columns.begin(), r.columns.end(), *c) == r.columns.end())
        r.columns.push_back(*c);
    if (r.columns.empty()) continue;
    if (r.title.empty())
      for (std::size_t k = 0; k < r.columns.size(); ++k)
        r.title.append(k ? ", " : "").append(t.columns()[r.columns[k]]);
    out.push_back(std::move(r));
  }
  return out;
}

// Geometry of a panel, in pixels from its top edge (12 px sans-serif text): title baseline,
// plot frame, tick labels under the frame, the "step" label under those; y tick labels left of
// the frame need ~7 characters; the legend sits right of the frame, as wide as its longest
// name needs (about 7 px a character after a 38 px stroke sample) up to a third of the width.
inline constexpr double title_baseline = 20, frame_top = 30, below_frame = 44;
inline constexpr double frame_left = 64, legend_min = 120, inner = 6;
inline constexpr double legend_sample = 38, legend_char = 7;

//! The legend's width in pixels, the same for every panel so that their frames line up.
inline double legend_width(const training_curves& t,
                           const std::vector<resolved_panel>& panels,
                           const svg_layout& layout) {
  std::size_t longest = 0;
  for (const resolved_panel& p : panels)
    for (const std::size_t c : p.columns)
      longest = std::max(longest, t.columns()[c].size() + std::string_view(" (no data)").size());
  return std::clamp(legend_sample + legend_char * double(longest) + 8, legend_min,
                    layout.width / 3.0);
}

inline void text(std::string& out,
                 double x,
                 double y,
                 std::string_view anchor,
                 std::string_view content,
                 std::string_view extra = {}) {
  out += "<text x=\"";
  append_coordinate(out, x);
  out += "\" y=\"";
  append_coordinate(out, y);
  out.append("\" text-anchor=\"").append(anchor).append("\"");
  if (!extra.empty()) out.append(" ").append(extra);
  out += ">";
  append_xml_text(out, content);
  out += "</text>\n";
}

inline void line(
    std::string& out, double x1, double y1, double x2, double y2, std::string_view attributes) {
  out += "<line x1=\"";
  append_coordinate(out, x1);
  out += "\" y1=\"";
  append_coordinate(out, y1);
  out += "\" x2=\"";
  append_coordinate(out, x2);
  out += "\" y2=\"";
  append_coordinate(out, y2);
  out.append("\" ").append(attributes).append("/>\n");
}

//! Tick labels with the digits the step needs: 0.685 for a step of 0.005, 1000 for 200. Up to
//! seven integer digits are written out; beyond that %g's exponent form is shorter.
inline std::string tick_label(double v, const axis_ticks& t) {
  double largest = 0;
  for (const double x : t.values) largest = std::max(largest, std::abs(x));
  const int step_digit = static_cast<int>(std::floor(std::log10(t.step) + 1e-9));
  const int top_digit = static_cast<int>(std::floor(std::log10(largest) + 1e-9));
  int precision = top_digit - step_digit + 1;
  if (top_digit < 7) precision = std::max(precision, top_digit + 1);
  std::string s;
  append_general(s, v, std::clamp(precision, 1, 17));
  return s;
}

inline void draw_series(const training_curves& t,
                        std::string& out,
                        std::size_t column,
                        std::size_t k,
                        const axis_map& xm,
                        const axis_map& ym) {
  std::vector<std::size_t> at;  // rows where the series is measured
  for (std::size_t r = 0; r < t.rows(); ++r)
    if (std::isfinite(t.row(r)[column])) at.push_back(r);
  if (at.empty()) return;

  // The series' usual spacing: the most common gap between measured rows (ties: the smallest).
  std::size_t usual = 1;
  if (at.size() > 1) {
    std::vector<std::size_t> gaps(at.size() - 1);
    for (std::size_t i = 1; i < at.size(); ++i) gaps[i - 1] = at[i] - at[i - 1];
    std::sort(gaps.begin(), gaps.end());
    std::size_t best_count = 0;
    for (std::size_t i = 0; i < gaps.size();) {
      std::size_t j = i;
      while (j < gaps.size() && gaps[j] == gaps[i]) ++j;
      if (j - i > best_count) {
        best_count = j - i;
        usual = gaps[i];
      }
      i = j;
    }
  }

  const std::string_view colour = palette[k % palette.size()];
  const std::string_view dash = dashes[(k / palette.size()) % dashes.size()];
  auto x = [&](std::size_t r) { append_coordinate(out, xm(t.row(r)[0])); };
  auto y = [&](std::size_t r) { append_coordinate(out, ym(t.row(r)[column])); };
  for (std::size_t i = 0; i < at.size();) {
    std::size_t j = i + 1;
    while (j < at.size() && at[j] - at[j - 1] <= usual) ++j;
    if (j - i == 1) {
      out += "<circle cx=\"";
      x(at[i]);
      out += "\" cy=\"";
      y(at[i]);
      out.append("\" r=\"2.5\" fill=\"").append(colour).append("\"/>\n");
    } else {
      out.append("<polyline fill=\"none\" stroke=\"").append(colour);
      out += "\" stroke-width=\"1.5\" stroke-linejoin=\"round\" stroke-linecap=\"round\"";
      if (!dash.empty()) out.append(" stroke-dasharray=\"").append(dash).append("\"");
      out += " points=\"";
      for (std::size_t p = i; p < j; ++p) {
        if (p > i) out += ' ';
        x(at[p]);
        out += ',';
        y(at[p]);
      }
      out += "\"/>\n";
    }
    i = j;
  }
}

inline void draw_panel(const training_curves& t,
                       std::string& out,
                       const resolved_panel& panel,
                       const axis_ticks& xt,
                       double step_lo,
                       double step_hi,
                       double top,
                       double legend,
                       bool first,
                       const svg_layout& layout) {
  const double w = layout.width, h = layout.panel_height;
  const double left = frame_left, right = w - legend - 12;
  const double y_top = top + frame_top, y_bottom = top + h - below_frame;

  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const std::size_t c : panel.columns)
    for (std::size_t r = 0; r < t.rows(); ++r)
      if (const double v = t.row(r)[c]; std::isfinite(v)) {
        lo = std::min(lo, std::clamp(v, -axis_limit, axis_limit));
        hi = std::max(hi, std::clamp(v, -axis_limit, axis_limit));
      }
  if (lo > hi) {  // nothing measured: an empty frame with a [0, 1] axis
    lo = 0;
    hi = 1;
  }
  const axis_ticks yt = nice_ticks(lo, hi);
  const axis_map xm{std::min(xt.values.front(), step_lo), std::max(xt.values.back(), step_hi),
                    left + inner, right - inner};
  const axis_map ym{std::min(yt.values.front(), lo), std::max(yt.values.back(), hi),
                    y_bottom - inner, y_top + inner};

  out += "<g>\n";
  text(out, left, top + title_baseline, "start", panel.title,
       "font-size=\"14\" font-weight=\"bold\"");
  for (const double v : xt.values) {
    line(out, xm(v), y_top, xm(v), y_bottom, "stroke=\"#e6e6e6\"");
    text(out, xm(v), y_bottom + 16, "middle", tick_label(v, xt));
  }
  for (const double v : yt.values) {
    line(out, left, ym(v), right, ym(v), "stroke=\"#e6e6e6\"");
    text(out, left - 6, ym(v) + 4, "end", tick_label(v, yt));
  }
  out += "<rect x=\"";
  append_coordinate(out, left);
  out += "\" y=\"";
  append_coordinate(out, y_top);
  out += "\" width=\"";
  append_coordinate(out, right - left);
  out += "\" height=\"";
  append_coordinate(out, y_bottom - y_top);
  out += "\" fill=\"none\" stroke=\"#999999\"/>\n";
  text(out, (left + right) / 2, y_bottom + 34, "middle", "step");

  for (std::size_t k = 0; k < panel.columns.size(); ++k)
    draw_series(t, out, panel.columns[k], k, xm, ym);
  for (const svg_marker& m : layout.markers) {
    if (m.step < xm.lo || m.step > xm.hi) continue;  // off the step axis
    const double x = xm(m.step);
    line(out, x, y_top, x, y_bottom, "stroke=\"#555555\" stroke-dasharray=\"4 3\"");
    if (first && !m.label.empty()) {
      // Right of the line, or left of it where the line is in the frame's right half.
      const bool left_side = x > (left + right) / 2;
      text(out, left_side ? x - 4 : x + 4, y_top + 12, left_side ? "end" : "start", m.label,
           "font-size=\"11\" fill=\"#555555\"");
    }
  }

  // Legend: a stroke sample and the name, one entry per series, 18 px apart; the full name as
  // a tooltip where a long one is cut to the legend's width (about 7 px per character at 12
  // px). Entries beyond the frame's height give way to a "+N more" line.
  const std::size_t fits =
      static_cast<std::size_t>(std::max(4.0, (legend - legend_sample - 8) / legend_char));
  const std::size_t room = static_cast<std::size_t>((y_bottom - y_top) / 18);
  const std::size_t shown =
      panel.columns.size() <= room ? panel.columns.size() : std::max<std::size_t>(room, 1) - 1;
  if (shown < panel.columns.size())
    text(out, right + 12, y_top + 14 + 18 * double(shown), "start",
         "+" + std::to_string(panel.columns.size() - shown) + " more");
  for (std::size_t k = 0; k < shown; ++k) {
    const std::string& name = t.columns()[panel.columns[k]];
    const double y = y_top + 10 + 18 * double(k);
    const std::string_view colour = palette[k % palette.size()];
    const std::string_view dash = dashes[(k / palette.size()) % dashes.size()];
    bool measured = false;
    for (std::size_t r = 0; r < t.rows() && !measured; ++r)
      measured = std::isfinite(t.row(r)[panel.columns[k]]);
    out += "<g><title>";
    append_xml_text(out, name);
    out += "</title>\n";
    std::string stroke = "stroke=\"" + std::string(colour) + "\" stroke-width=\"2\"";
    if (!dash.empty()) stroke.append(" stroke-dasharray=\"").append(dash).append("\"");
    line(out, right + 12, y, right + 32, y, stroke);
    text(out, right + 38, y + 4, "start", truncated(name, fits) + (measured ? "" : " (no data)"));
    out += "</g>\n";
  }
  out += "</g>\n";
}

inline std::string svg_text(const training_curves& t, const svg_layout& layout) {
  if (layout.width < 320)
    fail("svg_layout", "width", "at least 320 pixels", std::to_string(layout.width));
  if (layout.panel_height < 140)
    fail("svg_layout", "panel_height", "at least 140 pixels", std::to_string(layout.panel_height));
  const std::vector<resolved_panel> panels = resolve(t, layout);
  const double top = layout.title.empty() ? 8 : 40;
  const double height =
      top + (panels.empty() ? 40.0 : double(panels.size()) * layout.panel_height) + 8;

  double step_lo = 0, step_hi = 1;  // no rows: a [0, 1] step axis
  if (t.rows() > 0) {
    step_lo = step_hi = t.row(0)[0];
    for (std::size_t r = 1; r < t.rows(); ++r) {
      step_lo = std::min(step_lo, t.row(r)[0]);
      step_hi = std::max(step_hi, t.row(r)[0]);
    }
    step_lo = std::max(step_lo, -axis_limit);
    step_hi = std::min(step_hi, axis_limit);
  }
  for (const svg_marker& m : layout.markers)
    if (!std::isfinite(m.step))
      fail("svg_layout", "markers", "finite steps", "a marker at NaN or inf");
  const axis_ticks xt = nice_ticks(step_lo, step_hi);
  const double legend = legend_width(t, panels, layout);

  std::string out;
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"";
  out += std::to_string(layout.width) + "\" height=\"";
  append_coordinate(out, height);
  out += "\" viewBox=\"0 0 " + std::to_string(layout.width) + " ";
  append_coordinate(out, height);
  out += "\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#222222\">\n";
  if (!layout.title.empty()) {
    out += "<title>";
    append_xml_text(out, layout.title);
    out += "</title>\n";
  }
  out += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(layout.width) + "\" height=\"";
  append_coordinate(out, height);
  out += "\" fill=\"#ffffff\"/>\n";
  if (!layout.title.empty())
    text(out, layout.width / 2.0, 26, "middle", layout.title,
         "font-size=\"16\" font-weight=\"bold\"");
  if (panels.empty()) text(out, layout.width / 2.0, top + 24, "middle", "no columns to plot");
  for (std::size_t i = 0; i < panels.size(); ++i)
    draw_panel(t, out, panels[i], xt, step_lo, step_hi, top + double(i) * layout.panel_height,
               legend, i == 0, layout);
  out += "</svg>\n";
  return out;
}

}  // namespace detail::curves

//! An SVG plot of the curves, one panel per `layout` panel, readable in any browser with
//! nothing else installed (no scripts, fonts or stylesheets). In each panel every series is a
//! line through its measured points at its usual spacing — the most common gap, in rows,
//! between measurements, so a value measured every K rows still draws as one line — and a
//! longer gap (a NaN or ±inf where the series is usually measured) breaks the line; a point
//! with no neighbour on either side is drawn as a dot.
inline void write_svg(const training_curves& curves,
                      std::ostream& out,
                      const svg_layout& layout = {}) {
  const std::string text = detail::curves::svg_text(curves, layout);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) fail("write_svg", "cannot write to the stream");
}
//! Writes the SVG to `path` through a temporary file in the same directory.
inline void write_svg(const training_curves& curves,
                      const std::filesystem::path& path,
                      const svg_layout& layout = {}) {
  detail::write_file_atomically(path, std::string_view(detail::curves::svg_text(curves, layout)));
}

}  // namespace dafuse
