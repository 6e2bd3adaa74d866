// profiler: exact aggregates from explicit time points, the event cap, the summary table, a
// Chrome trace checked by a strict JSON parser written here, I/O errors and peak memory.
#include <dafuse/core/profiler.hpp>

#include "../check.hpp"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace core_profiler_test {

namespace df = dafuse;
using namespace std::chrono_literals;

namespace {

// ---- A strict JSON parser (RFC 8259), so the trace is checked against the grammar rather than
// against what this library happens to write. Recursive descent over the whole input. ----
struct json {
  enum kind_type { null, boolean, number, string, array, object } kind = null;
  bool b = false;
  double n = 0;
  std::string s;
  std::vector<json> items;        // array elements, or object values
  std::vector<std::string> keys;  // object keys, parallel to items

  //! The member `key` of an object, or nullptr.
  const json* find(std::string_view key) const {
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return &items[i];
    return nullptr;
  }
};

class json_parser {
 public:
  explicit json_parser(std::string_view text) : t_(text) {}

  //! The one value the text holds; throws std::runtime_error at the first deviation.
  json document() {
    json v = value(0);
    skip_space();
    if (i_ != t_.size()) error("text after the value");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at byte " + std::to_string(i_));
  }
  void skip_space() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r'))
      ++i_;
  }
  char peek() const { return i_ < t_.size() ? t_[i_] : '\0'; }
  void expect(char c) {
    if (peek() != c || i_ >= t_.size()) error(std::string("expected '") + c + "'");
    ++i_;
  }
  bool is_digit(char c) const { return c >= '0' && c <= '9'; }

  json value(int depth) {
    if (depth > 64) error("nesting deeper than 64");
    skip_space();
    json v;
    const char c = peek();
    if (c == '{') {
      v.kind = json::object;
      ++i_;
      skip_space();
      if (peek() == '}') {
        ++i_;
        return v;
      }
      for (;;) {
        skip_space();
        if (peek() != '"') error("expected a string key");
        v.keys.push_back(string());
        skip_space();
        expect(':');
        v.items.push_back(value(depth + 1));
        skip_space();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.kind = json::array;
      ++i_;
      skip_space();
      if (peek() == ']') {
        ++i_;
        return v;
      }
      for (;;) {
        v.items.push_back(value(depth + 1));
        skip_space();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.kind = json::string;
      v.s = string();
      return v;
    }
    if (c == '-' || is_digit(c)) {
      v.kind = json::number;
      v.n = number();
      return v;
    }
    for (const auto& [word, kind, truth] :
         {std::tuple{"true", json::boolean, true}, std::tuple{"false", json::boolean, false},
          std::tuple{"null", json::null, false}}) {
      if (t_.substr(i_).starts_with(word)) {
        i_ += std::string_view(word).size();
        v.kind = kind;
        v.b = truth;
        return v;
      }
    }
    error("expected a value");
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  double number() {
    const std::size_t start = i_;
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else if (is_digit(peek())) {
      while (is_digit(peek())) ++i_;
    } else {
      error("expected a digit");
    }
    if (peek() == '.') {
      ++i_;
      if (!is_digit(peek())) error("expected a digit after '.'");
      while (is_digit(peek())) ++i_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!is_digit(peek())) error("expected an exponent");
      while (is_digit(peek())) ++i_;
    }
    double out = 0;
    const auto r = std::from_chars(t_.data() + start, t_.data() + i_, out);
    if (r.ec != std::errc() || r.ptr != t_.data() + i_) error("number out of range");
    return out;
  }

  unsigned hex4() {
    unsigned u = 0;
    for (int k = 0; k < 4; ++k, ++i_) {
      const char c = peek();
      u <<= 4;
      if (c >= '0' && c <= '9')
        u |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f')
        u |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        u |= unsigned(c - 'A' + 10);
      else
        error("expected 4 hex digits after \\u");
    }
    return u;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xc0 | cp >> 6);
      out += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += char(0xe0 | cp >> 12);
      out += char(0x80 | (cp >> 6 & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    } else {
      out += char(0xf0 | cp >> 18);
      out += char(0x80 | (cp >> 12 & 0x3f));
      out += char(0x80 | (cp >> 6 & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    }
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (i_ >= t_.size()) error("unterminated string");
      const char c = t_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) error("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      const char e = peek();
      ++i_;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xdc00 && cp <= 0xdfff) error("lone low surrogate");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (peek() != '\\' || i_ + 1 >= t_.size() || t_[i_ + 1] != 'u')
              error("high surrogate without a low one");
            i_ += 2;
            const unsigned low = hex4();
            if (low < 0xdc00 || low > 0xdfff) error("high surrogate without a low one");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          --i_;
          error("invalid escape");
      }
    }
  }

  std::string_view t_;
  std::size_t i_ = 0;
};

json parse_json(std::string_view text) {
  return json_parser(text).document();
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Records a fixed timeline, in order, starting at the profiler's origin:
//   forward [0, 1) ms, backward [1, 3), update [3, 3.5), forward [3.5, 5.5), data_wait
//   [5.5, 5.6), forward [5.6, 8.6), backward [8.6, 10.6) — the intervals are exact nanoseconds.
struct timeline_entry {
  df::phase what;
  std::chrono::nanoseconds begin, duration;
};
const std::vector<timeline_entry> timeline = {
    {df::phase::forward, 0ms, 1ms},        {df::phase::backward, 1ms, 2ms},
    {df::phase::update, 3ms, 500us},       {df::phase::forward, 3500us, 2ms},
    {df::phase::data_wait, 5500us, 100us}, {df::phase::forward, 5600us, 3ms},
    {df::phase::backward, 8600us, 2ms}};

void record_timeline(df::profiler& p) {
  for (const timeline_entry& e : timeline)
    p.record(e.what, p.origin() + e.begin, p.origin() + e.begin + e.duration);
}

}  // namespace

TEST_CASE("name spells each phase as its enumerator") {
  const char* expected[] = {"data_wait", "forward",    "backward",
                            "update",    "evaluation", "checkpoint"};
  static_assert(std::size(expected) == df::phase_count);
  for (std::size_t i = 0; i < df::phase_count; ++i)
    CHECK(std::string_view(df::name(static_cast<df::phase>(i))) == expected[i]);
}

TEST_CASE("recorded phases aggregate calls, total, min, max and mean exactly") {
  df::profiler p;
  record_timeline(p);
  const df::profiler::phase_stats f = p.stats(df::phase::forward);
  CHECK(f.calls == 3);
  CHECK(f.total_seconds == doctest::Approx(6e-3).epsilon(1e-12));
  CHECK(f.min_seconds == doctest::Approx(1e-3).epsilon(1e-12));
  CHECK(f.max_seconds == doctest::Approx(3e-3).epsilon(1e-12));
  CHECK(f.mean_seconds() == doctest::Approx(2e-3).epsilon(1e-12));
  CHECK(p.calls(df::phase::backward) == 2);
  CHECK(p.total_seconds(df::phase::backward) == doctest::Approx(4e-3).epsilon(1e-12));
  CHECK(p.calls(df::phase::update) == 1);
  CHECK(p.total_seconds(df::phase::update) == doctest::Approx(0.5e-3).epsilon(1e-12));
  CHECK(p.calls(df::phase::data_wait) == 1);
  CHECK(p.total_seconds(df::phase::data_wait) == doctest::Approx(0.1e-3).epsilon(1e-12));
  for (df::phase unused : {df::phase::evaluation, df::phase::checkpoint}) {
    CHECK(p.calls(unused) == 0);
    CHECK(p.total_seconds(unused) == 0);
    CHECK(p.stats(unused).min_seconds == 0);
  }
  REQUIRE(p.events().size() == timeline.size());
  for (std::size_t i = 0; i < timeline.size(); ++i) {
    CHECK(p.events()[i].what == timeline[i].what);
    CHECK(p.events()[i].start == timeline[i].begin);
    CHECK(p.events()[i].duration == timeline[i].duration);
  }
  CHECK(p.dropped_events() == 0);

  // An end before its begin counts as a call of zero length, not a negative one.
  p.record(df::phase::checkpoint, p.origin() + 2ms, p.origin() + 1ms);
  CHECK(p.calls(df::phase::checkpoint) == 1);
  CHECK(p.total_seconds(df::phase::checkpoint) == 0);
}

TEST_CASE("profile_scope with a null profiler records nothing, and with one records once") {
  df::profiler p;
  df::profiler* none = nullptr;
  {
    df::profile_scope s(none, df::phase::forward);
    s.stop();
  }
  for (std::size_t i = 0; i < df::phase_count; ++i) CHECK(p.calls(static_cast<df::phase>(i)) == 0);
  CHECK(p.events().empty());

  const auto before = df::profiler::clock::now();
  { df::profile_scope s(&p, df::phase::backward); }
  {
    df::profile_scope s(p, df::phase::update);
    s.stop();  // the destructor must not record it again
    s.stop();
  }
  const auto after = df::profiler::clock::now();
  CHECK(p.calls(df::phase::backward) == 1);
  CHECK(p.calls(df::phase::update) == 1);
  REQUIRE(p.events().size() == 2);
  for (const df::profiler::event& e : p.events()) {
    CHECK(p.origin() + e.start >= before);
    CHECK(p.origin() + e.start + e.duration <= after);
  }
  // Real scopes lie within the wall time, so the summary can say what part no phase covers.
  CHECK(p.summary().find("% of wall") != std::string::npos);
}

TEST_CASE("past the cap, totals keep counting while events stop and are counted as dropped") {
  df::profiler p(4);
  CHECK(p.max_events() == 4);
  const df::profiler::event* storage = p.events().data();
  for (int i = 0; i < 10; ++i)
    p.record(df::phase::forward, p.origin() + i * 1ms, p.origin() + i * 1ms + 250us);
  CHECK(p.calls(df::phase::forward) == 10);
  CHECK(p.total_seconds(df::phase::forward) == doctest::Approx(2.5e-3).epsilon(1e-12));
  CHECK(p.events().size() == 4);
  CHECK(p.dropped_events() == 6);
  CHECK(p.events().back().start == 3ms);  // the first four are the ones kept
  // Recording wrote into the storage the constructor allocated: it never moved or grew.
  CHECK(p.events().data() == storage);

  df::profiler none_kept(0);
  none_kept.record(df::phase::update, none_kept.origin(), none_kept.origin() + 1ms);
  CHECK(none_kept.calls(df::phase::update) == 1);
  CHECK(none_kept.events().empty());
  CHECK(none_kept.dropped_events() == 1);
}

TEST_CASE("clear forgets totals, events and dropped events, and restarts the wall clock") {
  df::profiler p(2);
  record_timeline(p);
  REQUIRE(p.dropped_events() > 0);
  const auto old_origin = p.origin();
  p.clear();
  CHECK(p.origin() >= old_origin);
  for (std::size_t i = 0; i < df::phase_count; ++i) CHECK(p.calls(static_cast<df::phase>(i)) == 0);
  CHECK(p.events().empty());
  CHECK(p.dropped_events() == 0);
  CHECK(p.wall_seconds() >= 0);
  p.record(df::phase::evaluation, p.origin(), p.origin() + 1ms);
  CHECK(p.events().size() == 1);
  CHECK(p.events()[0].start == 0ms);
}

TEST_CASE("the summary lists each used phase with its calls and share, and omits unused ones") {
  df::profiler p;
  record_timeline(p);  // 10.6 ms in all: forward 6, backward 4, update 0.5, data_wait 0.1
  const std::string table = p.summary();
  INFO(table);
  struct expected_row {
    const char* name;
    std::size_t calls;
    double total_ms, mean_us, share;
  };
  const expected_row rows[] = {{"data_wait", 1, 0.1, 100, 100 * 0.1 / 10.6},
                               {"forward", 3, 6, 2000, 100 * 6 / 10.6},
                               {"backward", 2, 4, 2000, 100 * 4 / 10.6},
                               {"update", 1, 0.5, 500, 100 * 0.5 / 10.6},
                               {"all phases", 7, 10.6, 0, 100}};
  std::istringstream lines(table);
  std::string line;
  std::size_t found = 0;
  while (std::getline(lines, line)) {
    for (const expected_row& r : rows) {
      if (!line.starts_with(r.name) || line.substr(std::string_view(r.name).size(), 1) != " ")
        continue;
      ++found;
      std::istringstream cells(line.substr(std::string_view(r.name).size()));
      std::size_t calls = 0;
      double total_ms = 0;
      cells >> calls >> total_ms;
      CHECK(calls == r.calls);
      CHECK(total_ms == doctest::Approx(r.total_ms).epsilon(1e-6));
      std::vector<std::string> rest{std::istream_iterator<std::string>(cells), {}};
      REQUIRE(!rest.empty());
      REQUIRE(rest.back().ends_with("%"));
      const double share = std::stod(rest.back().substr(0, rest.back().size() - 1));
      CHECK(std::abs(share - r.share) <= 0.05 + 1e-9);  // printed with one decimal
      if (r.mean_us > 0) {
        REQUIRE(rest.size() == 4);  // mean, min, max, share
        CHECK(std::stod(rest[0]) == doctest::Approx(r.mean_us).epsilon(1e-6));
      }
    }
  }
  CHECK(found == std::size(rows));
  CHECK(table.find("evaluation") == std::string::npos);
  CHECK(table.find("checkpoint") == std::string::npos);
  CHECK(table.find("mean (µs)") != std::string::npos);
  CHECK(table.find("wall time") != std::string::npos);
  CHECK(table.find("peak memory") != std::string::npos);
  CHECK(table.find("device memory is not recorded") != std::string::npos);

  const std::string empty = df::profiler().summary();
  CHECK(empty.find("no phase recorded") != std::string::npos);
  CHECK(empty.find("forward") == std::string::npos);
}

TEST_CASE("the test's JSON parser rejects what strict JSON rejects") {
  CHECK_NOTHROW(parse_json(R"( {"a":[1,-0.5e+3,true,false,null,"\u00b5\n\ud83d\ude00"],"b":{}} )"));
  CHECK(parse_json(R"("\u00b5")").s == "µ");
  for (const char* bad :
       {"",         "{",       "[1,]",        R"({"a":1,})", "01",       "1.",        ".5",
        "-",        "+1",      "1e",          "NaN",         "Infinity", "'a'",       R"({a:1})",
        "\"a\nb\"", R"("\x")", R"("\ud800")", "[1] 2",       "tru",      R"({"a" 1})"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_json(bad), std::runtime_error);
  }
}

TEST_CASE("the Chrome trace is strict JSON with one complete event per recording") {
  const df::test::temp_dir dir("profiler_trace");
  const std::filesystem::path path = dir / "trace.json";
  df::profiler p;
  record_timeline(p);
  p.write_chrome_trace(path);
  CHECK(!std::filesystem::exists(dir / "trace.json.tmp"));
  const std::string text = read_file(path);
  json doc;
  REQUIRE_NOTHROW(doc = parse_json(text));
  REQUIRE(doc.kind == json::object);
  const json* events = doc.find("traceEvents");
  REQUIRE(events);
  REQUIRE(events->kind == json::array);
  const json* unit = doc.find("displayTimeUnit");
  REQUIRE(unit);
  CHECK(unit->s == "ms");

  std::vector<const json*> complete;
  for (const json& e : events->items) {
    REQUIRE(e.kind == json::object);
    const json* ph = e.find("ph");
    REQUIRE(ph);
    REQUIRE(ph->kind == json::string);
    for (const char* key : {"name", "pid", "tid"}) {
      INFO(key);
      CHECK(e.find(key));
    }
    if (ph->s == "X")
      complete.push_back(&e);
    else
      CHECK(ph->s == "M");  // the process and thread names
  }
  REQUIRE(complete.size() == timeline.size());
  double last_ts = -1;
  for (std::size_t i = 0; i < timeline.size(); ++i) {
    const json& e = *complete[i];
    INFO("event " << i);
    for (const char* key : {"name", "cat", "ph", "ts", "dur", "pid", "tid"}) {
      INFO(key);
      REQUIRE(e.find(key));
    }
    CHECK(e.find("name")->s == df::name(timeline[i].what));
    CHECK(e.find("cat")->s == "dafuse");
    REQUIRE(e.find("ts")->kind == json::number);
    REQUIRE(e.find("dur")->kind == json::number);
    const double ts = e.find("ts")->n, dur = e.find("dur")->n;
    CHECK(ts >= last_ts);
    last_ts = ts;
    const double begin_us = std::chrono::duration<double, std::micro>(timeline[i].begin).count();
    const double dur_us = std::chrono::duration<double, std::micro>(timeline[i].duration).count();
    CHECK(ts == doctest::Approx(begin_us).epsilon(1e-12));
    CHECK(dur == doctest::Approx(dur_us).epsilon(1e-12));
    CHECK(e.find("pid")->n == 1);
    CHECK(e.find("tid")->n == 1);
  }
  const json* other = doc.find("otherData");
  REQUIRE(other);
  REQUIRE(other->find("events_dropped"));
  CHECK(other->find("events_dropped")->n == 0);
  REQUIRE(other->find("peak_rss_bytes"));
#if defined(__linux__)
  CHECK(other->find("peak_rss_bytes")->n > 0);
#endif

  // Python's json module agrees, where a system Python is there to ask (optional: the parser
  // above is the check that always runs).
  const std::string py = "/usr/bin/python3";
  if (std::filesystem::exists(py) && path.string().find('\'') == std::string::npos &&
      std::system((py + " -c pass >/dev/null 2>&1").c_str()) == 0) {
    const std::string cmd =
        py + " -c 'import json,sys; json.load(open(sys.argv[1]))' '" + path.string() + "'";
    CHECK(std::system(cmd.c_str()) == 0);
  } else {
    MESSAGE("no usable /usr/bin/python3: skipped the cross-check with Python's json module");
  }

  // The stream overload writes the same document; past a cap, otherData counts the drops.
  df::profiler capped(3);
  record_timeline(capped);
  std::ostringstream out;
  capped.write_chrome_trace(out);
  json small;
  REQUIRE_NOTHROW(small = parse_json(out.str()));
  std::size_t x = 0;
  for (const json& e : small.find("traceEvents")->items) x += e.find("ph")->s == "X";
  CHECK(x == 3);
  CHECK(small.find("otherData")->find("events_dropped")->n == double(timeline.size() - 3));
}

TEST_CASE("writing a trace into a directory that does not exist throws an error naming the path") {
  const df::test::temp_dir dir("profiler_unwritable");
  const std::filesystem::path path = dir / "no_such_dir" / "trace.json";
  df::profiler p;
  record_timeline(p);
  CHECK_THROWS_WITH_AS(p.write_chrome_trace(path),
                       doctest::Contains((path.string() + ": cannot open").c_str()), df::error);
  CHECK_THROWS_WITH_AS(p.write_chrome_trace(path), doctest::Contains("No such file or directory"),
                       df::error);
  CHECK(!std::filesystem::exists(path));
}

TEST_CASE("peak_rss_bytes is positive and grows after touching a large allocation") {
#if defined(__linux__)
  const std::size_t peak = df::profiler::peak_rss_bytes();
  const std::size_t current = df::profiler::current_rss_bytes();
  CHECK(peak > 0);
  CHECK(current > 0);
  CHECK(current <= df::profiler::peak_rss_bytes());
  // Enough to pass the old high-water mark by 64 MiB, whatever earlier tests left behind.
  const std::size_t extra = 64u << 20;
  const std::size_t bytes = (peak > current ? peak - current : 0) + extra;
  std::vector<unsigned char> block(bytes, 1);  // written, so every page is resident
  volatile unsigned char sink = block[bytes / 2];
  (void)sink;
  CHECK(df::profiler::peak_rss_bytes() >= peak + extra / 2);
  CHECK(df::profiler::current_rss_bytes() >= current + extra / 2);
#else
  CHECK(df::profiler::peak_rss_bytes() == 0);
  MESSAGE("peak_rss_bytes is only implemented on Linux");
#endif
}

}  // namespace core_profiler_test
