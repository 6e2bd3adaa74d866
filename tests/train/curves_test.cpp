// SPDX-License-Identifier: Apache-2.0
// Tests for train/curves.hpp: exact CSV round trips, and errors that name the file and line.
#include <dafuse/train/curves.hpp>
#include "../check.hpp"
#include "curves_tables.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace train_curves_test {

namespace df = dafuse;

namespace {

constexpr double na = std::numeric_limits<double>::quiet_NaN();
constexpr double infinity = std::numeric_limits<double>::infinity();

using df::test::read_text;
using df::test::write_text;

bool same_bits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

TEST_CASE("a table keeps its columns and rows, and column() returns one column's values") {
  df::training_curves t{"step", "loss", "accuracy"};
  t.reserve(3);
  CHECK(t.rows() == 0);
  t.add({0, 0.7, na});
  t.add(std::vector<double>{10, 0.5, 0.8});
  t.add({20, 0.4, df::training_curves::not_measured});
  CHECK(t.columns() == std::vector<std::string>{"step", "loss", "accuracy"});
  CHECK(t.rows() == 3);
  CHECK(t.column("step") == std::vector<double>{0, 10, 20});
  CHECK(t.column("loss") == std::vector<double>{0.7, 0.5, 0.4});
  const auto acc = t.column("accuracy");
  CHECK((std::isnan(acc[0]) && acc[1] == 0.8 && std::isnan(acc[2])));
  CHECK(t.row(1)[1] == 0.5);
  CHECK(t.find_column("loss") == std::optional<std::size_t>(1));
  CHECK_FALSE(t.find_column("lambda"));
  CHECK_THROWS_WITH_AS(t.column("lambda"),
                       doctest::Contains("name: expected one of step, loss, accuracy"), df::error);
  CHECK(df::training_curves().columns() == std::vector<std::string>{"step"});
}

TEST_CASE("a row whose width differs from the column count is rejected") {
  df::training_curves t{"step", "loss", "accuracy"};
  CHECK_THROWS_WITH_AS(t.add({0, 0.7}),
                       "dafuse: training_curves::add: row: expected 3 values (step, loss, "
                       "accuracy), found 2 values",
                       df::error);
  CHECK_THROWS_WITH_AS(t.add({0, 0.7, 0.1, 0.2}), doctest::Contains("found 4 values"), df::error);
  CHECK(t.rows() == 0);
}

TEST_CASE("a step that is not a finite integer is rejected") {
  df::training_curves t{"step", "loss"};
  CHECK_THROWS_WITH_AS(t.add({1.5, 0.7}),
                       doctest::Contains("step: expected a finite integer, found 1.5"), df::error);
  CHECK_THROWS_WITH_AS(t.add({na, 0.7}), doctest::Contains("found NaN"), df::error);
  CHECK_THROWS_AS(t.add({infinity, 0.7}), df::error);
  CHECK(t.rows() == 0);
}

TEST_CASE("columns must start with step and have distinct non-empty names") {
  CHECK_THROWS_WITH_AS(df::training_curves({"loss", "step"}),
                       "dafuse: training_curves: columns: expected \"step\" as the first column, "
                       "found \"loss\"",
                       df::error);
  CHECK_THROWS_WITH_AS(df::training_curves(std::vector<std::string>{}),
                       doctest::Contains("found no columns"), df::error);
  CHECK_THROWS_WITH_AS(df::training_curves({"step", "loss", "loss"}),
                       doctest::Contains("column 3: expected a name no earlier column has"),
                       df::error);
  CHECK_THROWS_WITH_AS(df::training_curves({"step", ""}), doctest::Contains("column 2"), df::error);
  CHECK_THROWS_WITH_AS(df::training_curves({"step", "two\nlines"}),
                       doctest::Contains("without line breaks"), df::error);
}

TEST_CASE("a CSV round trip is exact, including NaN, infinities and a quoted column name") {
  const df::test::temp_dir dir("curves_round_trip");
  const std::string quoted = "acc, \"target\"";
  df::training_curves t{"step", "loss", quoted, "λ"};
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int r = 0; r < 200; ++r)
    t.add({double(r) * 25, std::ldexp(u(gen), int(r % 40) - 20), r % 7 == 0 ? na : u(gen),
           r == 3 ? infinity : (r == 4 ? -infinity : (r == 5 ? -0.0 : 1.0 / 3))});
  t.add({1e15, 5e-324, std::numeric_limits<double>::max(), 0.1});
  const auto path = dir / "curves.csv";
  t.write_csv(path.string());
  // Only the table is left: the temporary file was renamed into place.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                      std::filesystem::directory_iterator()) == 1);

  const std::string text = read_text(path);
  CHECK(text.starts_with("step,loss,\"acc, \"\"target\"\"\",λ\n"));
  CHECK(text.find("\n0,") != std::string::npos);    // integer steps have no ".0"
  CHECK(text.find("\n175,") != std::string::npos);  // row 7: step 175, NaN accuracy ...
  CHECK(text.find(",,0.3333333333333333\n") != std::string::npos);  // ... is an empty field

  const df::training_curves back = df::training_curves::read_csv(path.string());
  REQUIRE(back.columns() == t.columns());
  REQUIRE(back.rows() == t.rows());
  for (std::size_t r = 0; r < t.rows(); ++r)
    for (std::size_t c = 0; c < t.columns().size(); ++c) {
      INFO("row " << r << ", column " << c);
      CHECK(same_bits(back.row(r)[c], t.row(r)[c]));
    }

  std::ostringstream stream;
  t.write_csv(stream);
  CHECK(stream.str() == text);
}

TEST_CASE("read_csv accepts CRLF line ends, a byte-order mark, quoted numbers and spaces") {
  std::istringstream in("\xEF\xBB\xBFstep,\"a,b\",c\r\n0, 1.5 ,\r\n\r\n\"10\",+2,-3e-2");
  const auto t = df::training_curves::read_csv(in, "hand.csv");
  CHECK(t.columns() == std::vector<std::string>{"step", "a,b", "c"});
  REQUIRE(t.rows() == 2);
  CHECK(t.row(0)[1] == 1.5);
  CHECK(std::isnan(t.row(0)[2]));
  CHECK(t.row(1)[0] == 10);
  CHECK(t.row(1)[1] == 2);
  CHECK(t.row(1)[2] == -0.03);
}

TEST_CASE("malformed CSV is rejected, naming the file, the line and what was expected") {
  const df::test::temp_dir dir("curves_malformed");
  const auto path = (dir / "bad.csv").string();
  struct bad_case {
    const char* text;
    const char* message;
  };
  const bad_case cases[] = {
      {"step,loss\n0,0.5\n10\n", ": line 3: expected 2 fields, as in the header, found 1"},
      {"step,loss\n0,0.5,1\n", ": line 2: expected 2 fields, as in the header, found 3"},
      {"step,loss\n0,abc\n",
       ": line 2: loss: expected a number or an empty field (not measured), "
       "found \"abc\""},
      {"step,loss\n0,1.5x\n", ": line 2: loss: expected a number"},
      {"loss,step\n0,1\n",
       ": line 1: expected a header whose first field is \"step\", found "
       "\"loss\""},
      {"0,0.5\n", ": line 1: expected a header whose first field is \"step\", found \"0\""},
      {"", ": line 1: expected a header line whose first field is \"step\", found an empty file"},
      {"step,loss,loss\n", ": line 1: column 3: expected a name no earlier column has"},
      {"step,\"loss\n", ": line 1: expected a closing quote before the end of the line"},
      {"step,\"loss\"x\n", ": line 1: expected ',' or the end of the line after a closing quote"},
      {"step,loss\n0,1\n2.5,1\n", ": line 3: step: expected a finite integer, found 2.5"},
      {"step,loss\n0,1\n,1\n", ": line 3: step: expected a finite integer, found NaN"},
      // Text from the file is shown with control bytes escaped, never sent to the terminal.
      {"step,loss\n0,\x1b[2J\x1b]0;x\x07\n",
       ": line 2: loss: expected a number or an empty field (not measured), found "
       "\"\\x1b[2J\\x1b]0;x\\x07\""},
  };
  for (const bad_case& c : cases) {
    INFO(c.text);
    write_text(path, c.text);
    CHECK_THROWS_WITH_AS(df::training_curves::read_csv(path),
                         doctest::Contains(("dafuse: " + path + c.message).c_str()), df::error);
  }
}

TEST_CASE("reading a missing file names the path and the system's reason") {
  const df::test::temp_dir dir("curves_missing");
  const auto path = (dir / "absent.csv").string();
  CHECK_THROWS_WITH_AS(
      df::training_curves::read_csv(path),
      doctest::Contains((path + ": cannot open for reading: No such file or directory").c_str()),
      df::error);
}

TEST_CASE("reading a FIFO or a device is refused at once, not waited on or read without end") {
  const df::test::temp_dir dir("curves_fifo");
  const auto fifo = dir / "curves.csv";
  df::test::make_fifo(fifo);
  std::string message;
  CHECK(df::test::finishes_within(10, fifo, [&] {
    message = df::test::error_message([&] { df::training_curves::read_csv(fifo); });
  }));
  CHECK(message.find(fifo.string() + ": cannot read: it is a FIFO (named pipe)") !=
        std::string::npos);
  CHECK_THROWS_WITH_AS(df::training_curves::read_csv(std::filesystem::path("/dev/zero")),
                       doctest::Contains("/dev/zero: cannot read: it is a character device"),
                       df::error);
}

TEST_CASE("writing into a directory that does not exist throws naming the path") {
  const df::test::temp_dir dir("curves_no_dir");
  const df::training_curves t = df::test::dann_like(5, 2);
  const auto csv = (dir / "missing" / "curves.csv").string();
  CHECK_THROWS_WITH_AS(t.write_csv(csv),
                       doctest::Contains(("dafuse: " + csv + ": cannot open").c_str()), df::error);
}

}  // namespace train_curves_test
