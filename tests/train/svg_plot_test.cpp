// SPDX-License-Identifier: Apache-2.0
// Tests for train/svg_plot.hpp: nice axis ticks, and SVG plots that are well-formed XML a browser
// can show on its own.
#include <dafuse/train/svg_plot.hpp>
#include "../check.hpp"
#include "curves_tables.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace train_svg_plot_test {

namespace df = dafuse;

namespace {

constexpr double na = std::numeric_limits<double>::quiet_NaN();
constexpr double infinity = std::numeric_limits<double>::infinity();

using df::test::dann_like;

// What a minimal XML 1.0 parser finds in a document: element counts, the attributes of each
// element in order, and the text content (entities decoded). `error` is empty when well-formed.
struct xml_document {
  std::string error;
  std::string root;
  std::map<std::string, int> count;
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> elements;
  std::vector<std::string> texts;
  int number_of(const std::string& element) const {
    const auto it = count.find(element);
    return it == count.end() ? 0 : it->second;
  }
};

// Checks what the SVG writer produces (and more): one root element, start and end tags that
// match, attribute values in quotes without '<', no attribute given twice, '&' only in the five
// predefined entities or character references, only whitespace outside the root. Comments,
// CDATA and DOCTYPE are not needed and count as errors.
xml_document parse_xml(const std::string& s) {
  xml_document d;
  std::size_t i = 0;
  std::vector<std::string> open;
  auto is_name_start = [](char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
           static_cast<unsigned char>(c) >= 0x80;
  };
  auto is_name = [&](char c) {
    return is_name_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
  };
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  auto name = [&]() {
    std::string n;
    if (i < s.size() && is_name_start(s[i]))
      while (i < s.size() && is_name(s[i])) n += s[i++];
    return n;
  };
  // Decodes character data up to `stop` (excluded); false on a bare '&' or a forbidden '<'.
  auto decode = [&](std::size_t from, std::size_t to, std::string& out) {
    for (std::size_t k = from; k < to; ++k) {
      if (s[k] == '<') return false;
      if (s[k] != '&') {
        out += s[k];
        continue;
      }
      const std::size_t semi = s.find(';', k);
      if (semi == std::string::npos || semi >= to) return false;
      const std::string ref = s.substr(k + 1, semi - k - 1);
      static const std::map<std::string, char> named = {
          {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
      if (const auto it = named.find(ref); it != named.end())
        out += it->second;
      else if (ref.size() > 1 && ref[0] == '#' &&
               std::all_of(ref.begin() + 1, ref.end(),
                           [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        out += '?';
      else
        return false;
      k = semi;
    }
    return true;
  };
  auto fail_at = [&](const std::string& what) {
    d.error = what + " at offset " + std::to_string(i);
    return d;
  };

  if (s.starts_with("<?xml")) {
    i = s.find("?>");
    if (i == std::string::npos) return fail_at("an unterminated XML declaration");
    i += 2;
  }
  bool root_closed = false;
  while (i < s.size()) {
    if (s[i] != '<') {
      const std::size_t end = std::min(s.find('<', i), s.size());
      std::string t;
      if (!decode(i, end, t)) return fail_at("a bare '&' in text");
      const bool blank = std::all_of(t.begin(), t.end(), is_space);
      if (open.empty() && !blank) return fail_at("text outside the root element");
      if (!blank) d.texts.push_back(t);
      i = end;
      continue;
    }
    ++i;
    if (i < s.size() && s[i] == '/') {
      ++i;
      const std::string n = name();
      if (open.empty() || open.back() != n)
        return fail_at("an end tag </" + n + "> that matches no open tag");
      open.pop_back();
      while (i < s.size() && is_space(s[i])) ++i;
      if (i >= s.size() || s[i] != '>') return fail_at("an unterminated end tag");
      ++i;
      if (open.empty()) root_closed = true;
      continue;
    }
    const std::string n = name();
    if (n.empty()) return fail_at("a '<' that starts no tag");
    if (open.empty() && (root_closed || !d.root.empty())) return fail_at("a second root element");
    if (d.root.empty()) d.root = n;
    std::map<std::string, std::string> attributes;
    while (true) {
      const bool spaced = i < s.size() && is_space(s[i]);
      while (i < s.size() && is_space(s[i])) ++i;
      if (i >= s.size()) return fail_at("an unterminated start tag");
      if (s[i] == '>' || s.compare(i, 2, "/>") == 0) break;
      if (!spaced) return fail_at("attributes not separated by whitespace");
      const std::string a = name();
      if (a.empty()) return fail_at("a malformed attribute name");
      if (i >= s.size() || s[i] != '=') return fail_at("attribute " + a + " without '='");
      ++i;
      if (i >= s.size() || (s[i] != '"' && s[i] != '\'')) return fail_at("an unquoted value");
      const char quote = s[i++];
      const std::size_t close = s.find(quote, i);
      if (close == std::string::npos) return fail_at("an unterminated attribute value");
      std::string value;
      if (!decode(i, close, value)) return fail_at("'<' or a bare '&' in attribute " + a);
      if (!attributes.emplace(a, value).second) return fail_at("attribute " + a + " given twice");
      i = close + 1;
    }
    ++d.count[n];
    d.elements.emplace_back(n, attributes);
    if (s[i] == '/') {
      i += 2;
      if (open.empty()) root_closed = true;
    } else {
      ++i;
      open.push_back(n);
    }
  }
  if (!open.empty()) return fail_at("<" + open.back() + "> never closed");
  if (d.root.empty()) return fail_at("no root element");
  return d;
}

std::string svg_of(const df::training_curves& t, const df::svg_layout& layout = {}) {
  std::ostringstream out;
  df::write_svg(t, out, layout);
  return out.str();
}

}  // namespace

TEST_CASE("write_svg into a directory that does not exist throws naming the path") {
  const df::test::temp_dir dir("svg_plot_no_dir");
  const df::training_curves t = dann_like(5, 2);
  const auto svg = (dir / "missing" / "curves.svg").string();
  CHECK_THROWS_WITH_AS(df::write_svg(t, svg), doctest::Contains("No such file or directory"),
                       df::error);
  CHECK_THROWS_WITH_AS(df::write_svg(t, svg), doctest::Contains(svg.c_str()), df::error);
}

TEST_CASE("a rewrite replaces the whole file and leaves no temporary file behind") {
  const df::test::temp_dir dir("curves_rewrite");
  const auto path = dir / "curves.svg";
  const df::training_curves t = dann_like(30, 3);
  df::test::write_text(path, std::string(100000, 'x'));
  df::write_svg(t, path.string());
  CHECK(df::test::read_text(path) == svg_of(t));
  CHECK_FALSE(std::filesystem::exists(dir / "curves.svg.tmp"));
}

TEST_CASE("nice_ticks picks 1-2-5 steps giving 4 to 6 ticks that cover the range") {
  struct expected_case {
    double lo, hi, step, first, last;
  };
  const expected_case cases[] = {
      {0, 1, 0.2, 0, 1},
      {0, 1000, 200, 0, 1000},
      {0, 0.69, 0.2, 0, 0.8},
      {0.68, 0.70, 0.005, 0.68, 0.70},
      {0.05, 2.3, 0.5, 0, 2.5},
      {-3, 7, 5, -5, 10},
      {0, 4999, 1000, 0, 5000},
      {0.1, 0.4, 0.1, 0.1, 0.4},
      {-1e-6, 1e-6, 5e-7, -1e-6, 1e-6},
  };
  for (const auto& c : cases) {
    INFO(c.lo << " .. " << c.hi);
    const df::axis_ticks t = df::nice_ticks(c.lo, c.hi);
    CHECK(t.step == doctest::Approx(c.step));
    CHECK(t.values.front() == doctest::Approx(c.first));
    CHECK(t.values.back() == doctest::Approx(c.last));
  }
  CHECK(df::nice_ticks(0.1, 0.3).values == std::vector<double>{0.1, 0.15, 0.2, 0.25, 0.3});

  // Random ranges over many magnitudes: every step is 1, 2 or 5 × 10^k, the ticks are its
  // multiples and cover the range, and there are 4 to 6 whenever some 1-2-5 step gives that.
  std::mt19937_64 gen(11);
  std::uniform_real_distribution<double> u(-1, 1), magnitude(-8, 8);
  int outside = 0;
  for (int n = 0; n < 20000; ++n) {
    const double scale = std::pow(10.0, magnitude(gen));
    double lo = u(gen) * scale, hi = lo + std::abs(u(gen)) * scale * std::pow(10.0, u(gen) * 2);
    if (hi <= lo) continue;
    const df::axis_ticks t = df::nice_ticks(lo, hi);
    INFO(lo << " .. " << hi << ", step " << t.step);
    const double k = std::floor(std::log10(t.step) + 1e-9);
    const double m = t.step / std::pow(10.0, k);
    REQUIRE((std::abs(m - 1) < 1e-9 || std::abs(m - 2) < 1e-9 || std::abs(m - 5) < 1e-9));
    REQUIRE(t.values.front() <= lo + 1e-9 * t.step);
    REQUIRE(t.values.back() >= hi - 1e-9 * t.step);
    for (std::size_t i = 0; i < t.values.size(); ++i) {
      const double q = t.values[i] / t.step;
      REQUIRE(std::abs(q - std::round(q)) < 1e-6);
      if (i > 0) REQUIRE(t.values[i] - t.values[i - 1] == doctest::Approx(t.step));
    }
    const std::size_t count = t.values.size();
    if (count >= 4 && count <= 6) continue;
    REQUIRE((count == 3 || count == 7));
    ++outside;
    for (int e = -12; e <= 12; ++e)  // no 1-2-5 step would have done
      for (const double mm : {1.0, 2.0, 5.0}) {
        const double s = mm * std::pow(10.0, e);
        const double c = std::ceil(hi / s - 1e-9) - std::floor(lo / s + 1e-9) + 1;
        CHECK_FALSE((c >= 4 && c <= 6));
      }
  }
  CHECK(outside < 200);  // rare: 1% at most
}

TEST_CASE("nice_ticks widens an empty range and refuses non-finite ends") {
  const df::axis_ticks at_one = df::nice_ticks(1, 1);
  CHECK(at_one.values.front() < 1);
  CHECK(at_one.values.back() > 1);
  const df::axis_ticks at_zero = df::nice_ticks(0, 0);
  CHECK(at_zero.values.front() <= -1);
  CHECK(at_zero.values.back() >= 1);
  const df::axis_ticks huge = df::nice_ticks(-1e308, 1e308);
  CHECK(std::isfinite(huge.values.front()));
  CHECK(std::isfinite(huge.values.back()));
  CHECK_THROWS_AS(df::nice_ticks(0, infinity), df::error);
  CHECK_THROWS_AS(df::nice_ticks(na, 1), df::error);
}

TEST_CASE("the SVG is well-formed, self-contained XML with its size and viewBox set") {
  const std::string svg = svg_of(dann_like(50, 5), {.title = "DANN <two moons> & \"friends\""});
  const xml_document d = parse_xml(svg);
  REQUIRE_MESSAGE(d.error.empty(), d.error);
  CHECK(d.root == "svg");
  const auto& root = d.elements.front().second;
  CHECK(root.at("xmlns") == "http://www.w3.org/2000/svg");
  CHECK(root.at("width") == "960");
  CHECK(root.count("height") == 1);
  CHECK(root.at("viewBox") == "0 0 960 " + root.at("height"));
  for (const char* banned : {"<script", "href", "url(", "@import", "<style", "<foreignObject"})
    CHECK(svg.find(banned) == std::string::npos);
  CHECK(svg.find("DANN &lt;two moons&gt; &amp; &quot;friends&quot;") != std::string::npos);
  // One panel per column except step, each with an x label "step".
  CHECK(std::count(d.texts.begin(), d.texts.end(), "step") == 4);
  CHECK(std::count(d.texts.begin(), d.texts.end(), "label_loss") >= 2);  // title and legend
}

TEST_CASE("a NaN gap in a series splits its line into two polylines") {
  df::training_curves t{"step", "loss"};
  for (int r = 0; r < 10; ++r) t.add({double(r), r == 4 || r == 5 ? na : 1.0 / (r + 1)});
  const xml_document d = parse_xml(svg_of(t));
  REQUIRE_MESSAGE(d.error.empty(), d.error);
  CHECK(d.number_of("polyline") == 2);
  CHECK(d.number_of("circle") == 0);

  // Without the gap: one line through all ten points.
  df::training_curves whole{"step", "loss"};
  for (int r = 0; r < 10; ++r) whole.add({double(r), 1.0 / (r + 1)});
  const xml_document w = parse_xml(svg_of(whole));
  CHECK(w.number_of("polyline") == 1);
  for (const auto& [name, attributes] : w.elements)
    if (name == "polyline")
      CHECK(std::count(attributes.at("points").begin(), attributes.at("points").end(), ',') == 10);
}

TEST_CASE(
    "a series measured every K rows is one line, broken only where a measurement is missing") {
  // target_accuracy every 5 rows: one line through its 10 points.
  const xml_document d = parse_xml(svg_of(dann_like(50, 5)));
  REQUIRE_MESSAGE(d.error.empty(), d.error);
  CHECK(d.number_of("polyline") == 4);  // one per panel and series
  CHECK(d.number_of("circle") == 0);

  // Row 25's measurement missing: the line breaks there.
  df::training_curves t{"step", "accuracy"};
  for (int r = 0; r < 50; ++r) t.add({double(r), r % 5 == 0 && r != 25 ? r / 50.0 : na});
  const xml_document g = parse_xml(svg_of(t));
  CHECK(g.number_of("polyline") == 2);
}

TEST_CASE("the legend names each series in its panel, escaped, each in its own colour") {
  const std::string odd = "a<b & \"c\" 'd'";
  df::training_curves t{"step", "plain", odd, "third"};
  for (int r = 0; r < 5; ++r) t.add({double(r), r * 1.0, r * 2.0, r * 3.0});
  const df::svg_layout layout{.panels = {{"all", {"plain", odd, "third", "not a column"}},
                                         {"none of these", {"missing", "also missing"}}}};
  const std::string svg = svg_of(t, layout);
  const xml_document d = parse_xml(svg);
  REQUIRE_MESSAGE(d.error.empty(), d.error);
  CHECK(svg.find("a&lt;b &amp; &quot;c&quot; &apos;d&apos;") != std::string::npos);
  for (const std::string& name : {std::string("plain"), odd, std::string("third")})
    CHECK(std::count(d.texts.begin(), d.texts.end(), name) >= 1);
  // The unknown column is skipped and the panel with no known columns is left out.
  CHECK(std::count(d.texts.begin(), d.texts.end(), "all") == 1);
  CHECK(std::count(d.texts.begin(), d.texts.end(), "none of these") == 0);
  CHECK(std::count(d.texts.begin(), d.texts.end(), "step") == 1);
  CHECK(d.number_of("polyline") == 3);
  std::set<std::string> colours;
  for (const auto& [name, attributes] : d.elements)
    if (name == "polyline") colours.insert(attributes.at("stroke"));
  CHECK(colours.size() == 3);
}

TEST_CASE("constant and single-point series give finite coordinates") {
  df::training_curves t{"step", "constant", "single", "nothing", "zero"};
  for (int r = 0; r < 20; ++r) t.add({double(r) * 100, 0.693, r == 7 ? 0.5 : na, na, 0.0});
  const std::string svg = svg_of(t);
  const xml_document d = parse_xml(svg);
  REQUIRE_MESSAGE(d.error.empty(), d.error);
  std::string lower = svg;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  CHECK(lower.find("nan") == std::string::npos);
  CHECK(lower.find("inf") == std::string::npos);
  CHECK(d.number_of("polyline") == 2);  // constant, zero
  CHECK(d.number_of("circle") == 1);    // single
  CHECK(std::count(d.texts.begin(), d.texts.end(), "nothing (no data)") == 1);

  // One row only, and no rows at all: still finite.
  df::training_curves one{"step", "loss"};
  one.add({0, 0.5});
  df::training_curves none{"step", "loss"};
  for (const auto* table : {&one, &none}) {
    const std::string s = svg_of(*table);
    CHECK(parse_xml(s).error.empty());
    CHECK(s.find("nan") == std::string::npos);
    CHECK(s.find("inf") == std::string::npos);
  }
  CHECK(parse_xml(svg_of(one)).count["circle"] == 1);
}

TEST_CASE("text that is not valid UTF-8 or XML is replaced, so the file stays well-formed") {
  df::training_curves t{"step", std::string("latin1 \xE9 ctrl \x01")};
  t.add({0, 1});
  t.add({1, 2});
  const std::string svg = svg_of(t);
  CHECK(parse_xml(svg).error.empty());
  CHECK(svg.find("latin1 \xEF\xBF\xBD ctrl \xEF\xBF\xBD") != std::string::npos);
}

TEST_CASE("a layout too small to draw is rejected, naming the field") {
  const df::training_curves t = dann_like(5, 1);
  CHECK_THROWS_WITH_AS(svg_of(t, {.width = 100}),
                       "dafuse: svg_layout: width: expected at least 320 pixels, found 100",
                       df::error);
  CHECK_THROWS_WITH_AS(svg_of(t, {.panel_height = 20}), doctest::Contains("panel_height"),
                       df::error);
}

TEST_CASE("a legend with more series than fit beside the frame ends in a '+N more' line") {
  std::vector<std::string> names{"step"};
  for (int i = 0; i < 20; ++i) names.push_back("s" + std::to_string(i));
  df::training_curves t(names);
  for (int r = 0; r < 3; ++r) {
    std::vector<double> row{double(r)};
    for (int i = 0; i < 20; ++i) row.push_back(r * i);
    t.add(row);
  }
  df::svg_layout layout;
  layout.panels = {{"crowded", std::vector<std::string>(names.begin() + 1, names.end())}};
  const xml_document d = parse_xml(svg_of(t, layout));
  REQUIRE_MESSAGE(d.error.empty(), d.error);
  CHECK(d.number_of("polyline") == 20);  // every series is drawn
  // 186 px of frame hold 10 entries of 18 px: 9 names and the "+11 more" line.
  CHECK(std::count(d.texts.begin(), d.texts.end(), "+11 more") == 1);
  CHECK(std::count(d.texts.begin(), d.texts.end(), "s8") == 2);  // tooltip and legend
  CHECK(std::count(d.texts.begin(), d.texts.end(), "s9") == 0);
}

TEST_CASE("the legend is as wide as its longest name, so no name is cut") {
  df::training_curves t{"step", "loss", "target_accuracy (oracle)"};
  for (int r = 0; r < 5; ++r) t.add({double(r), 1.0 / (r + 1), 0.1 * r});
  const xml_document d = parse_xml(
      svg_of(t, {.panels = {{"a", {"loss"}}, {"b", {"loss", "target_accuracy (oracle)"}}}}));
  REQUIRE_MESSAGE(d.error.empty(), d.error);
  // Both the tooltip and the legend text carry the whole name, with no ellipsis.
  CHECK(std::count(d.texts.begin(), d.texts.end(), "target_accuracy (oracle)") == 2);
  // Every panel's frame has the same width (the legend is sized once for all panels).
  std::set<std::string> frame_widths;
  for (const auto& element : d.elements)
    if (element.first == "rect" && element.second.count("stroke"))
      frame_widths.insert(element.second.at("width"));
  CHECK(frame_widths.size() == 1);
}

TEST_CASE("a marker draws a dashed line in every panel and its label once; bad ones are refused") {
  const df::training_curves t = dann_like(50, 1);
  const df::svg_layout layout{.panels = {{"losses", {"label_loss"}}, {"domain", {"domain_loss"}}},
                              .markers = {{.step = 20, .label = "selected: step 20"},
                                          {.step = 1e9, .label = "off the axis"}}};
  const xml_document d = parse_xml(svg_of(t, layout));
  REQUIRE_MESSAGE(d.error.empty(), d.error);
  int dashed = 0;
  for (const auto& element : d.elements)
    if (element.first == "line" && element.second.count("stroke-dasharray") &&
        element.second.at("stroke-dasharray") == "4 3")
      ++dashed;
  CHECK(dashed == 2);  // one per panel; the marker beyond the last step is not drawn
  CHECK(std::count(d.texts.begin(), d.texts.end(), "selected: step 20") == 1);
  CHECK(std::count(d.texts.begin(), d.texts.end(), "off the axis") == 0);
  CHECK_THROWS_WITH_AS(svg_of(t, {.markers = {{.step = na}}}),
                       "dafuse: svg_layout: markers: expected finite steps, found a marker at "
                       "NaN or inf",
                       df::error);
}

}  // namespace train_svg_plot_test
