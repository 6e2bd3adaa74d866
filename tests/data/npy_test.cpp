// SPDX-License-Identifier: Apache-2.0
// Tests for data/npy.hpp: round trips, headers other writers produce, and every rejected input.
#include <dafuse/data/npy.hpp>

#include "../check.hpp"
#include "npy_files.hpp"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

namespace data_npy_test {

namespace {

namespace fs = std::filesystem;
using dafuse::data::dtype;
using dafuse::data::host_array;
using dafuse::test::temp_dir;

using dafuse::test::bytes;
using dafuse::test::make_npy;
using dafuse::test::write_bytes;

bytes read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

//! The little-endian bytes of `values`, as an NPY data section.
template <class T>
bytes raw_of(const std::vector<T>& values) {
  bytes b(values.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), values.data(), b.size());
  return b;
}

//! The start of every message about `path` and `field`: "dafuse: <path>: <field>:".
std::string about(const fs::path& path, std::string_view field) {
  return "dafuse: " + path.string() + ": " + std::string(field) + ":";
}

template <class T>
void check_round_trip(const temp_dir& tmp,
                      const std::vector<std::size_t>& shape,
                      const std::vector<T>& values) {
  const fs::path path = tmp / "round_trip.npy";
  dafuse::data::save_npy<T>(path, shape, values);
  CHECK_FALSE(fs::exists(fs::path(path.string() + ".tmp")));

  // The data starts on a 64-byte boundary and the header ends in '\n' (NPY format spec).
  const bytes file = read_bytes(path);
  const dafuse::data::npy_header h = dafuse::data::parse_npy_header(file, path.string());
  CHECK(h.data_offset % 64 == 0);
  CHECK(file[h.data_offset - 1] == '\n');
  CHECK(h.type == dafuse::data::dtype_of_v<T>);
  CHECK(h.shape == shape);
  CHECK_FALSE(h.fortran_order);

  const host_array<T> a = dafuse::data::load_npy<T>(path);
  CHECK(a.shape == shape);
  CHECK(a.values == values);
}

}  // namespace

TEST_CASE("descr_of names the NPY type string numpy writes for each dtype") {
  CHECK(dafuse::data::descr_of(dtype::float32) == "<f4");
  CHECK(dafuse::data::descr_of(dtype::int32) == "<i4");
  CHECK(dafuse::data::descr_of(dtype::uint8) == "|u1");
  CHECK(dafuse::data::descr_of(dtype::float64) == "<f8");
  CHECK(dafuse::data::descr_of(dtype::int8) == "|i1");
  CHECK(dafuse::data::descr_of(dtype::int16) == "<i2");
  CHECK(dafuse::data::descr_of(dtype::int64) == "<i8");
  CHECK(dafuse::data::descr_of(dtype::uint16) == "<u2");
  CHECK(dafuse::data::descr_of(dtype::uint32) == "<u4");
  CHECK(dafuse::data::descr_of(dtype::uint64) == "<u8");
  for (const dtype t : dafuse::data::all_dtypes) {
    CAPTURE(dafuse::data::name_of(t));
    // The size in the descr is the element's size in bytes.
    CHECK(std::size_t(dafuse::data::descr_of(t)[2] - '0') == dafuse::data::size_of(t));
  }
  static_assert(dafuse::data::dtype_of_v<float> == dtype::float32);
  static_assert(dafuse::data::dtype_of_v<double> == dtype::float64);
  static_assert(dafuse::data::dtype_of_v<std::int8_t> == dtype::int8);
  static_assert(dafuse::data::dtype_of_v<std::int16_t> == dtype::int16);
  static_assert(dafuse::data::dtype_of_v<std::int32_t> == dtype::int32);
  static_assert(dafuse::data::dtype_of_v<std::int64_t> == dtype::int64);
  static_assert(dafuse::data::dtype_of_v<std::uint8_t> == dtype::uint8);
  static_assert(dafuse::data::dtype_of_v<std::uint16_t> == dtype::uint16);
  static_assert(dafuse::data::dtype_of_v<std::uint32_t> == dtype::uint32);
  static_assert(dafuse::data::dtype_of_v<std::uint64_t> == dtype::uint64);
}

TEST_CASE("host_array rows and row_size split the shape into samples and features") {
  CHECK(host_array<float>{{}, {1.f}}.rows() == 1);
  CHECK(host_array<float>{{}, {1.f}}.row_size() == 1);
  CHECK(host_array<float>{{5}, std::vector<float>(5)}.rows() == 5);
  CHECK(host_array<float>{{5}, std::vector<float>(5)}.row_size() == 1);
  CHECK(host_array<float>{{4, 2, 3}, std::vector<float>(24)}.rows() == 4);
  CHECK(host_array<float>{{4, 2, 3}, std::vector<float>(24)}.row_size() == 6);
}

TEST_CASE("save_npy then load_npy gives back float32 arrays of 0, 1 and 3 dimensions") {
  temp_dir tmp("npy_test");
  check_round_trip<float>(tmp, {}, {3.25f});
  check_round_trip<float>(tmp, {5}, {0.f, -1.5f, 2.f, 1e-30f, 3e38f});
  std::vector<float> cube(2 * 3 * 4);
  for (std::size_t i = 0; i < cube.size(); ++i) cube[i] = 0.5f * static_cast<float>(i) - 3.f;
  check_round_trip<float>(tmp, {2, 3, 4}, cube);
}

TEST_CASE("save_npy then load_npy gives back int32 arrays of 0, 1 and 3 dimensions") {
  temp_dir tmp("npy_test");
  check_round_trip<std::int32_t>(tmp, {}, {-7});
  check_round_trip<std::int32_t>(tmp, {4}, {0, -2147483647 - 1, 2147483647, 9});
  std::vector<std::int32_t> cube(3 * 1 * 2);
  for (std::size_t i = 0; i < cube.size(); ++i) cube[i] = static_cast<std::int32_t>(i) * -1000;
  check_round_trip<std::int32_t>(tmp, {3, 1, 2}, cube);
}

TEST_CASE("save_npy then load_npy gives back uint8 arrays of 0, 1 and 3 dimensions") {
  temp_dir tmp("npy_test");
  check_round_trip<std::uint8_t>(tmp, {}, {255});
  check_round_trip<std::uint8_t>(tmp, {3}, {0, 128, 255});
  std::vector<std::uint8_t> cube(2 * 2 * 5);
  for (std::size_t i = 0; i < cube.size(); ++i) cube[i] = static_cast<std::uint8_t>(i * 13);
  check_round_trip<std::uint8_t>(tmp, {2, 2, 5}, cube);
}

TEST_CASE("save_npy and load_npy handle arrays with a zero dimension") {
  temp_dir tmp("npy_test");
  check_round_trip<float>(tmp, {0, 16}, {});
  check_round_trip<std::int32_t>(tmp, {0}, {});
}

TEST_CASE("save_npy overwrites an existing file and the host_array overload writes the same") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "a.npy";
  dafuse::data::save_npy<std::int32_t>(path, {2}, std::vector<std::int32_t>{1, 2});
  const host_array<std::int32_t> a{{2, 2}, {1, 2, 3, 4}};
  dafuse::data::save_npy(path, a);
  const host_array<std::int32_t> b = dafuse::data::load_npy<std::int32_t>(path);
  CHECK(b.shape == a.shape);
  CHECK(b.values == a.values);
}

TEST_CASE("load_npy reads a version 2.0 file with a 4-byte header length") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "v2.npy";
  write_bytes(path, make_npy(2, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }\n",
                             raw_of<std::int32_t>({1, 2, 3, 4, 5, 6})));
  const host_array<std::int32_t> a = dafuse::data::load_npy<std::int32_t>(path);
  CHECK(a.shape == std::vector<std::size_t>{2, 3});
  CHECK(a.values == std::vector<std::int32_t>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("load_npy reads a version 3.0 file") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "v3.npy";
  write_bytes(path,
              make_npy(3, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }\n", {7, 8}));
  CHECK(dafuse::data::load_npy<std::uint8_t>(path).values == std::vector<std::uint8_t>{7, 8});
}

TEST_CASE("load_npy accepts keys in any order, double quotes, odd spacing and trailing commas") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "odd.npy";
  const bytes data = raw_of<float>({1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
  for (const std::string_view header : {
           R"({"shape": (2,3,), "fortran_order": False, "descr": "<f4"})",
           "{ 'fortran_order' :False,'shape':( 2 , 3 ),'descr':'<f4' , }   \n",
           R"({'descr': "<f4", "shape": (2, 3), 'fortran_order': False,})",
       }) {
    CAPTURE(header);
    write_bytes(path, make_npy(1, header, data));
    const host_array<float> a = dafuse::data::load_npy<float>(path);
    CHECK(a.shape == std::vector<std::size_t>{2, 3});
    CHECK(a.values == std::vector<float>{1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
  }
}

TEST_CASE("load_npy accepts the shapes (), (5,) and Python 2 longs such as (2L, 1L)") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "shapes.npy";
  write_bytes(path, make_npy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }\n",
                             raw_of<std::int32_t>({42})));
  CHECK(dafuse::data::load_npy<std::int32_t>(path).shape.empty());
  write_bytes(path, make_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }\n",
                             {1, 2, 3, 4, 5}));
  CHECK(dafuse::data::load_npy<std::uint8_t>(path).shape == std::vector<std::size_t>{5});
  write_bytes(
      path, make_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2L, 1L), }\n", {1, 2}));
  CHECK(dafuse::data::load_npy<std::uint8_t>(path).shape == std::vector<std::size_t>{2, 1});
}

TEST_CASE("load_npy_as_float converts uint8 and int32 values without scaling") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "convert.npy";
  dafuse::data::save_npy<std::uint8_t>(path, {2, 2}, std::vector<std::uint8_t>{0, 1, 128, 255});
  host_array<float> a = dafuse::data::load_npy_as_float(path);
  CHECK(a.shape == std::vector<std::size_t>{2, 2});
  CHECK(a.values == std::vector<float>{0.f, 1.f, 128.f, 255.f});

  dafuse::data::save_npy<std::int32_t>(path, {3}, std::vector<std::int32_t>{-5, 0, 70000});
  a = dafuse::data::load_npy_as_float(path);
  CHECK(a.values == std::vector<float>{-5.f, 0.f, 70000.f});

  dafuse::data::save_npy<float>(path, {1}, std::vector<float>{0.125f});
  CHECK(dafuse::data::load_npy_as_float(path).values == std::vector<float>{0.125f});
}

TEST_CASE("load_npy rejects a file without the NPY magic") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "not.npy";
  write_bytes(path, {'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path),
                       doctest::Contains((about(path, "magic") + " expected").c_str()),
                       dafuse::error);
  write_bytes(path, {});
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path),
                       doctest::Contains((about(path, "magic") + " expected").c_str()),
                       dafuse::error);
}

TEST_CASE("load_npy rejects an unsupported version") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "v9.npy";
  write_bytes(path, make_npy(9, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n",
                             raw_of<float>({1.f})));
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path),
                       doctest::Contains((about(path, "version") + " expected").c_str()),
                       dafuse::error);
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path), doctest::Contains("found 9.0"),
                       dafuse::error);
}

TEST_CASE("load_npy rejects a header length that runs past the end of the file") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "short_header.npy";
  bytes b = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n");
  // erase, not resize: GCC 12's -Wstringop-overflow reads a shrinking resize as a huge fill.
  REQUIRE(b.size() > 20);
  b.erase(b.end() - 20, b.end());
  write_bytes(path, b);
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path),
                       doctest::Contains((about(path, "header length") + " expected").c_str()),
                       dafuse::error);
  // Cut inside the fixed-size prefix, too.
  write_bytes(path, {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 80});
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path),
                       doctest::Contains((about(path, "header length") + " expected").c_str()),
                       dafuse::error);
  write_bytes(path, {0x93, 'N', 'U', 'M', 'P', 'Y', 1});
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path),
                       doctest::Contains((about(path, "version") + " expected").c_str()),
                       dafuse::error);
}

TEST_CASE("load_npy rejects data shorter than the shape needs") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "short_data.npy";
  write_bytes(path, make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
                             raw_of<float>({1.f, 2.f, 3.f, 4.f, 5.f})));
  CHECK_THROWS_WITH_AS(
      dafuse::data::load_npy<float>(path),
      doctest::Contains((about(path, "data") + " expected 24 bytes for shape (2, 3)").c_str()),
      dafuse::error);
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path), doctest::Contains("found 20"),
                       dafuse::error);
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy_as_float(path),
                       doctest::Contains((about(path, "data") + " expected 24 bytes").c_str()),
                       dafuse::error);
}

TEST_CASE("load_npy rejects extra bytes after the data") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "long_data.npy";
  write_bytes(path, make_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }\n",
                             {1, 2, 3, 4}));
  CHECK_THROWS_WITH_AS(
      dafuse::data::load_npy<std::uint8_t>(path),
      doctest::Contains((about(path, "data") + " expected 3 bytes for shape (3,)").c_str()),
      dafuse::error);
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<std::uint8_t>(path),
                       doctest::Contains("found 4 (extra trailing bytes)"), dafuse::error);
}

namespace {

//! Values of `T` that reach both ends of its range (and, for floats, fractions and signs).
template <class T>
std::vector<T> extremes() {
  using lim = std::numeric_limits<T>;
  if constexpr (std::is_floating_point_v<T>)
    return {T(0), T(-1.5), T(0.1), lim::max(), lim::lowest(), lim::min(), T(3)};
  else
    return {T(0), T(1), lim::max(), lim::min(), T(lim::max() / 3), T(7), T(lim::min() / 5)};
}

//! Saves extremes<T>() as [7] little-endian and [1, 7] big-endian, and checks that load_npy<T>
//! reads both back exactly and load_npy_as_float converts both as static_cast<float> does.
template <class T>
void check_dtype_round_trip(const temp_dir& tmp) {
  const std::vector<T> v = extremes<T>();
  CAPTURE(dafuse::data::name_of(dafuse::data::dtype_of_v<T>));
  std::vector<float> as_float;
  for (const T x : v) as_float.push_back(static_cast<float>(x));
  const fs::path little = tmp / "little.npy", big = tmp / "big.npy";
  dafuse::data::save_npy<T>(little, {v.size()}, v);
  dafuse::test::save_array_big_endian<T>(big, {1, v.size()}, v);
  const dafuse::data::npy_header hb = dafuse::data::read_npy_header(big);
  CHECK(hb.type == dafuse::data::dtype_of_v<T>);
  CHECK(hb.byte_order == (sizeof(T) > 1 ? std::endian::big : std::endian::little));
  for (const fs::path& p : {little, big}) {
    CAPTURE(p.string());
    CHECK(dafuse::data::load_npy<T>(p).values == v);
    const host_array<float> f = dafuse::data::load_npy_as_float(p);
    CHECK(f.shape == (p == little ? std::vector<std::size_t>{7} : std::vector<std::size_t>{1, 7}));
    // Bit for bit: float(double max) is refused below, so extremes<double> stop at float's range.
    CHECK(std::memcmp(f.values.data(), as_float.data(), 4 * as_float.size()) == 0);
  }
}

}  // namespace

TEST_CASE("every dtype round-trips through save_npy and load_npy, in either byte order") {
  temp_dir tmp("npy_dtypes");
  check_dtype_round_trip<float>(tmp);
  check_dtype_round_trip<std::int8_t>(tmp);
  check_dtype_round_trip<std::int16_t>(tmp);
  check_dtype_round_trip<std::int32_t>(tmp);
  check_dtype_round_trip<std::int64_t>(tmp);
  check_dtype_round_trip<std::uint8_t>(tmp);
  check_dtype_round_trip<std::uint16_t>(tmp);
  check_dtype_round_trip<std::uint32_t>(tmp);
  check_dtype_round_trip<std::uint64_t>(tmp);
  // float64 as load_npy reads it, whole; as float, within float32's range (see below).
  const std::vector<double> d = extremes<double>();
  for (const bool big : {false, true}) {
    const fs::path p = tmp / "f8.npy";
    if (big)
      dafuse::test::save_array_big_endian<double>(p, {d.size()}, d);
    else
      dafuse::data::save_npy<double>(p, {d.size()}, d);
    CHECK(dafuse::data::load_npy<double>(p).values == d);
  }
}

TEST_CASE("save_npy writes each dtype's header as numpy's np.save writes it") {
  temp_dir tmp("npy_dtypes");
  const auto header = [&](auto v) {
    using T = decltype(v);
    const fs::path p = tmp / "h.npy";
    dafuse::data::save_npy<T>(p, {2, 3}, std::vector<T>(6));
    const bytes b = read_bytes(p);
    return std::string(b.begin() + 10, b.begin() + 10 + 53);
  };
  // numpy 2.4's np.save(np.zeros((2, 3), dtype)), first 53 bytes of the dict.
  CHECK(header(0.0) == "{'descr': '<f8', 'fortran_order': False, 'shape': (2,");
  CHECK(header(std::int8_t{}) == "{'descr': '|i1', 'fortran_order': False, 'shape': (2,");
  CHECK(header(std::int64_t{}) == "{'descr': '<i8', 'fortran_order': False, 'shape': (2,");
  CHECK(header(std::uint16_t{}) == "{'descr': '<u2', 'fortran_order': False, 'shape': (2,");
}

TEST_CASE("load_npy_as_float rounds float64 to the nearest float32 as numpy's astype does") {
  temp_dir tmp("npy_f64");
  const fs::path p = tmp / "x.npy";
  // 1 + 2^-30 rounds to 1; 0.1 to float's 0.1f; -0 stays -0; a subnormal double flushes to 0.
  const std::vector<double> v = {1.0 + std::ldexp(1.0, -30),
                                 0.1,
                                 -0.0,
                                 1e-300,
                                 double(std::numeric_limits<float>::max()),
                                 -3.0e38};
  dafuse::data::save_npy<double>(p, {3, 2}, v);
  const host_array<float> f = dafuse::data::load_npy_as_float(p);
  CHECK(f.shape == std::vector<std::size_t>{3, 2});
  CHECK(f.values ==
        std::vector<float>{1.0f, 0.1f, 0.0f, 0.0f, std::numeric_limits<float>::max(), -3.0e38f});
  CHECK(std::signbit(f.values[2]));
}

TEST_CASE("a finite float64 beyond float32's range is refused naming the element; NaN passes") {
  temp_dir tmp("npy_f64");
  const fs::path p = tmp / "x.npy";
  dafuse::data::save_npy<double>(p, {2, 3}, std::vector<double>{0, 1, 2, 3, -1e300, 5});
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy_as_float(p),
                       (about(p, "value[1][1]") +
                        " expected a value float32 can hold (magnitude at most 3.4028235e+38), "
                        "found -1e+300")
                           .c_str(),
                       dafuse::error);
  // Non-finite values come through as they are: the data set's checks name them.
  const double inf = std::numeric_limits<double>::infinity();
  dafuse::data::save_npy<double>(p, {3}, std::vector<double>{std::nan(""), inf, -inf});
  const host_array<float> f = dafuse::data::load_npy_as_float(p);
  CHECK(std::isnan(f.values[0]));
  CHECK(f.values[1] == std::numeric_limits<float>::infinity());
  CHECK(f.values[2] == -std::numeric_limits<float>::infinity());
}

TEST_CASE("load_npy_as_int32 reads every integer dtype whose values fit int32") {
  temp_dir tmp("npy_int");
  const fs::path p = tmp / "y.npy";
  const auto check = [&](auto t, const std::vector<std::int32_t>& want) {
    using T = decltype(t);
    CAPTURE(dafuse::data::name_of(dafuse::data::dtype_of_v<T>));
    std::vector<T> v;
    for (const std::int32_t x : want) v.push_back(static_cast<T>(x));
    dafuse::data::save_npy<T>(p, {v.size()}, v);
    CHECK(dafuse::data::load_npy_as_int32(p).values == want);
    dafuse::test::save_array_big_endian<T>(p, {v.size()}, v);
    CHECK(dafuse::data::load_npy_as_int32(p).values == want);
  };
  constexpr std::int32_t lo = std::numeric_limits<std::int32_t>::min();
  constexpr std::int32_t hi = std::numeric_limits<std::int32_t>::max();
  check(std::int8_t{}, {0, 9, -128, 127});
  check(std::int16_t{}, {0, 9, -32768, 32767});
  check(std::int32_t{}, {0, 9, lo, hi});
  check(std::int64_t{}, {0, 9, lo, hi});
  check(std::uint8_t{}, {0, 9, 255});
  check(std::uint16_t{}, {0, 9, 65535});
  check(std::uint32_t{}, {0, 9, hi});
  check(std::uint64_t{}, {0, 9, hi});
}

TEST_CASE("load_npy_as_int32 refuses a value outside int32's range, naming the element and value") {
  temp_dir tmp("npy_int");
  const fs::path p = tmp / "y.npy";
  dafuse::data::save_npy<std::int64_t>(p, {5}, std::vector<std::int64_t>{0, 1, 2, 5000000000, 4});
  CHECK_THROWS_WITH_AS(
      dafuse::data::load_npy_as_int32(p, "labels"),
      (about(p, "labels[3]") +
       " expected a value in int32's range [-2147483648, 2147483647], found 5000000000")
          .c_str(),
      dafuse::error);
  dafuse::data::save_npy<std::int64_t>(p, {2, 2}, std::vector<std::int64_t>{0, 1, -2147483649, 4});
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy_as_int32(p),
                       doctest::Contains((about(p, "value[1][0]") + " expected").c_str()),
                       dafuse::error);
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy_as_int32(p), doctest::Contains("found -2147483649"),
                       dafuse::error);
  dafuse::test::save_array_big_endian<std::uint64_t>(
      p, {2}, {7, std::numeric_limits<std::uint64_t>::max()});
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy_as_int32(p),
                       doctest::Contains("value[1]: expected a value in int32's range "
                                         "[-2147483648, 2147483647], found 18446744073709551615"),
                       dafuse::error);
  dafuse::data::save_npy<std::uint32_t>(p, {1}, std::vector<std::uint32_t>{2147483648u});
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy_as_int32(p), doctest::Contains("found 2147483648"),
                       dafuse::error);
}

TEST_CASE("load_npy_as_int32 refuses float files: the values must be integers, and the fix") {
  temp_dir tmp("npy_int");
  const fs::path p = tmp / "y.npy";
  dafuse::data::save_npy<double>(p, {2}, std::vector<double>{0, 1});
  CHECK_THROWS_WITH_AS(
      dafuse::data::load_npy_as_int32(p, "labels"),
      (about(p, "descr") +
       " expected an integer type ('|i1' to '<i8', '|u1' to '<u8'), found '<f8' (float64): labels "
       "must be integers; convert with y.astype(np.int32)")
          .c_str(),
      dafuse::error);
  dafuse::test::save_array_big_endian<float>(p, {2}, {0, 1});
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy_as_int32(p),
                       doctest::Contains("found '>f4' (float32, big-endian): value must be "
                                         "integers; convert with y.astype(np.int32)"),
                       dafuse::error);
}

TEST_CASE("dtypes no loader reads are named as numpy names them, with the numpy call that fixes") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "descr.npy";
  const auto refused = [&](std::string_view descr, std::size_t size, std::string_view found) {
    CAPTURE(descr);
    write_bytes(path, make_npy(1,
                               "{'descr': '" + std::string(descr) +
                                   "', 'fortran_order': False, 'shape': (1,), }\n",
                               bytes(size, 0)));
    const std::string expected =
        " expected a float or integer type ('<f4', '<f8', '|i1' to '<i8', '|u1' to '<u8'; '>' "
        "for big-endian), found " +
        std::string(found) + "; convert with ";
    CHECK_THROWS_WITH_AS(dafuse::data::load_npy_as_float(path),
                         (about(path, "descr") + expected + "x.astype(np.float32)").c_str(),
                         dafuse::error);
    CHECK_THROWS_WITH_AS(dafuse::data::load_npy_as_int32(path),
                         doctest::Contains((expected + "y.astype(np.int32)").c_str()),
                         dafuse::error);
    CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path),
                         doctest::Contains((std::string(found) + "; convert with").c_str()),
                         dafuse::error);
  };
  refused("<f2", 2, "'<f2' (float16)");
  refused("|b1", 1, "'|b1' (bool)");
  refused("<c8", 8, "'<c8' (complex)");
  refused("<U1", 4, "'<U1' (strings)");
  refused("|O", 8, "'|O' (Python objects)");
  refused("<M8[D]", 8, "'<M8[D]' (dates or times)");
  refused("|f4", 4, "'|f4'");  // '|' is for one-byte types only
  refused("<f16", 16, "'<f16'");
}

TEST_CASE("load_npy rejects Fortran-order data") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "fortran.npy";
  write_bytes(path, make_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n",
                             raw_of<float>({1.f, 2.f, 3.f, 4.f})));
  CHECK_THROWS_WITH_AS(
      dafuse::data::load_npy<float>(path),
      doctest::Contains(
          (about(path, "fortran_order") + " expected False (C order), found True").c_str()),
      dafuse::error);
}

TEST_CASE("load_npy rejects a file whose dtype is not the one requested, saying how to convert") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "floats.npy";
  dafuse::data::save_npy<float>(path, {2}, std::vector<float>{1.f, 2.f});
  CHECK_THROWS_WITH_AS(
      dafuse::data::load_npy<std::int32_t>(path),
      (about(path, "descr") + " expected '<i4' (int32), found '<f4' (float32); convert with "
                              "arr.astype(np.int32)")
          .c_str(),
      dafuse::error);
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<std::uint8_t>(path),
                       doctest::Contains((about(path, "descr") + " expected '|u1'").c_str()),
                       dafuse::error);
}

TEST_CASE("load_npy reports a missing file by name and reason") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "missing.npy";
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path),
                       doctest::Contains(("dafuse: " + path.string() + ": cannot open").c_str()),
                       dafuse::error);
  CHECK_THROWS_WITH_AS(
      dafuse::data::load_npy_as_float(tmp.path()),
      doctest::Contains(("dafuse: " + tmp.path().string() + ": cannot open").c_str()),
      dafuse::error);
}

TEST_CASE("load_npy rejects malformed, negative and overflowing shapes") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "shape.npy";
  for (const std::string_view shape : {"(2, 3", "[2, 3]", "(2 3)", "(5)", "(,)", "(2,,3)", "(a,)",
                                       "(-2, 3)", "(99999999999999999999999,)", "2"}) {
    CAPTURE(shape);
    const std::string header =
        "{'descr': '<f4', 'fortran_order': False, 'shape': " + std::string(shape) + ", }\n";
    write_bytes(path, make_npy(1, header, bytes(24, 0)));
    CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path),
                         doctest::Contains((about(path, "shape") + " expected").c_str()),
                         dafuse::error);
  }
  // Dimensions that fit one by one but whose product does not.
  write_bytes(path, make_npy(1,
                             "{'descr': '<f4', 'fortran_order': False, "
                             "'shape': (4294967296, 4294967296, 2), }\n"));
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path),
                       doctest::Contains((about(path, "shape") + " expected a total size").c_str()),
                       dafuse::error);
}

TEST_CASE("load_npy rejects a header dict with a missing, unknown or repeated key") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "keys.npy";
  const auto check = [&](std::string_view header, std::string_view field) {
    CAPTURE(header);
    write_bytes(path, make_npy(1, header, bytes(4, 0)));
    CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path),
                         doctest::Contains((about(path, field) + " expected").c_str()),
                         dafuse::error);
  };
  check("{'descr': '<f4', 'fortran_order': False, }\n", "shape");
  check("{'fortran_order': False, 'shape': (1,), }\n", "descr");
  check("{'descr': '<f4', 'shape': (1,), }\n", "fortran_order");
  check("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}\n", "header");
  check("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\n", "descr");
  check("{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}\n", "fortran_order");
  check("{'descr': '<f4', 'fortran_order': False 'shape': (1,)}\n", "header");
  check("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk\n", "header");
  check("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}\n", "descr");
  check("{'descr: '<f4', 'fortran_order': False, 'shape': (1,)}\n", "header");
  check("['descr', '<f4']\n", "header");
  check("", "header");
  check("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", "header");
}

TEST_CASE("parse_npy_header never reads past the bytes it is given") {
  // Every prefix of a valid file either parses or fails with a dafuse::error, never crashes.
  const bytes file = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n",
                              raw_of<float>({1.f}));
  for (std::size_t n = 0; n <= file.size(); ++n) {
    const std::vector<unsigned char> part(file.begin(),
                                          file.begin() + static_cast<std::ptrdiff_t>(n));
    try {
      (void)dafuse::data::parse_npy_header(part, "prefix");
    } catch (const dafuse::error&) {
    }
  }
}

TEST_CASE("save_npy rejects values that do not fill the shape and leaves no file behind") {
  temp_dir tmp("npy_test");
  const fs::path path = tmp / "bad.npy";
  CHECK_THROWS_WITH_AS(
      dafuse::data::save_npy<float>(path, {2, 3}, std::vector<float>(5)),
      doctest::Contains(
          (about(path, "values") + " expected 6 elements for shape (2, 3), found 5").c_str()),
      dafuse::error);
  CHECK_FALSE(fs::exists(path));
  CHECK_FALSE(fs::exists(fs::path(path.string() + ".tmp")));
}

TEST_CASE("save_npy reports a directory it cannot write to and keeps the old file intact") {
  temp_dir tmp("npy_test");
  const fs::path missing = tmp / "no_such_dir" / "a.npy";
  CHECK_THROWS_WITH_AS(dafuse::data::save_npy<float>(missing, {1}, std::vector<float>{1.f}),
                       doctest::Contains(("dafuse: " + missing.string() + ": cannot open").c_str()),
                       dafuse::error);

  // A directory in the way of the rename: the write fails after the temporary file is complete.
  const fs::path blocked = tmp / "blocked.npy";
  fs::create_directories(blocked / "child");
  CHECK_THROWS_AS(dafuse::data::save_npy<float>(blocked, {1}, std::vector<float>{1.f}),
                  dafuse::error);
  CHECK(fs::is_directory(blocked / "child"));
  CHECK_FALSE(fs::exists(fs::path(blocked.string() + ".tmp")));
}

TEST_CASE("the shared MNIST subset loads as 2000 float images of 16x16 and int32 labels 0..9") {
#if defined(DAFUSE_SHARED_DATA_DIR)
  const fs::path dir = fs::path(DAFUSE_SHARED_DATA_DIR) / "jda_mnist_usps";
#else
  const fs::path dir;
#endif
  const fs::path images_path = dir / "mnist_images.npy";
  const fs::path labels_path = dir / "mnist_labels.npy";
  if (dir.empty() || !fs::exists(images_path) || !fs::exists(labels_path)) {
    MESSAGE(
        "skipped: shared data not found (define DAFUSE_SHARED_DATA_DIR to the folder that "
        "holds jda_mnist_usps/)");
    return;
  }
  const host_array<float> images = dafuse::data::load_npy<float>(images_path);
  CHECK(images.shape == std::vector<std::size_t>{2000, 16, 16});
  CHECK(images.rows() == 2000);
  CHECK(images.row_size() == 256);
  CHECK(images.values.size() == 2000u * 16u * 16u);

  const host_array<std::int32_t> labels = dafuse::data::load_npy<std::int32_t>(labels_path);
  REQUIRE(labels.shape == std::vector<std::size_t>{2000});
  std::vector<int> seen(10, 0);
  for (const std::int32_t y : labels.values) {
    REQUIRE(y >= 0);
    REQUIRE(y <= 9);
    ++seen[static_cast<std::size_t>(y)];
  }
  for (int digit = 0; digit < 10; ++digit) {
    CAPTURE(digit);
    CHECK(seen[static_cast<std::size_t>(digit)] > 0);
  }
}

// Bounded reads (issue 25): the header first, its promise against the file's size, the data
// straight into the values, and only regular files.

namespace {
//! An NPY version 1.0 header for `shape` of `descr`, padded with spaces to `length` bytes.
std::string padded_header(std::string_view descr, std::string_view shape, std::size_t length) {
  std::string h = "{'descr': '" + std::string(descr) +
                  "', 'fortran_order': False, 'shape': " + std::string(shape) + ", }";
  REQUIRE(h.size() + 1 <= length);
  h.append(length - h.size() - 1, ' ');
  return h + '\n';
}
}  // namespace

TEST_CASE("load_npy refuses a FIFO without a writer at once instead of blocking") {
  temp_dir tmp("npy_fifo");
  const fs::path fifo = tmp / "pipe.npy";
  dafuse::test::make_fifo(fifo);
  std::string message;
  CHECK(dafuse::test::finishes_within(10, fifo, [&] {
    try {
      dafuse::data::load_npy<float>(fifo);
    } catch (const dafuse::error& e) {
      message = e.what();
    }
  }));
  CHECK(message.find(fifo.string() + ": cannot read: it is a FIFO (named pipe), not a regular "
                                     "file") != std::string::npos);
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy_as_float("/dev/zero"),
                       doctest::Contains("/dev/zero: cannot read: it is a character device"),
                       dafuse::error);
}

TEST_CASE("load_npy and read_npy_header read headers longer than 4 KiB") {
  temp_dir tmp("npy_long_header");
  const fs::path path = tmp / "long.npy";
  write_bytes(path, make_npy(1, padded_header("|u1", "(2, 2, 2)", 9990),
                             bytes{0, 1, 2, 3, 250, 251, 254, 255}));
  const dafuse::data::npy_header h = dafuse::data::read_npy_header(path);
  CHECK(h.type == dtype::uint8);
  CHECK(h.shape == std::vector<std::size_t>{2, 2, 2});
  CHECK(h.data_offset == 10000);
  CHECK(dafuse::data::load_npy<std::uint8_t>(path).values ==
        std::vector<std::uint8_t>{0, 1, 2, 3, 250, 251, 254, 255});
}

TEST_CASE("a header length over 1 MiB is refused before the header is read") {
  temp_dir tmp("npy_huge_header");
  const fs::path path = tmp / "huge.npy";
  bytes b = make_npy(2, padded_header("<f4", "(1,)", std::size_t(1) << 21), raw_of<float>({1.f}));
  write_bytes(path, b);
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy<float>(path),
                       doctest::Contains((about(path, "header length") +
                                          " expected at most 1048576 bytes (numpy writes a few "
                                          "hundred), found 2097152")
                                             .c_str()),
                       dafuse::error);
}

TEST_CASE("a 64 MiB file that is not NPY is refused without reading it into memory") {
  temp_dir tmp("npy_big_garbage");
  const fs::path path = tmp / "garbage.npy";
  {
    std::ofstream out(path, std::ios::binary);
    const std::string block(1 << 20, 'g');
    for (int i = 0; i < 64; ++i) out << block;
  }
  const dafuse::test::peak_memory peak;
  CHECK_THROWS_WITH_AS(dafuse::data::load_npy_as_float(path),
                       doctest::Contains((about(path, "magic") + " expected").c_str()),
                       dafuse::error);
  if (peak.usable()) CHECK(peak.growth_bytes() < 4e6);  // the old reader took 64 MiB here
}

TEST_CASE("loading reads the data straight into the values: the peak is about the array's size") {
  temp_dir tmp("npy_peak");
  const std::size_t n = std::size_t(16) << 20;  // 16 Mi values: 64 MiB of float32
  const fs::path f32 = tmp / "f32.npy", i32 = tmp / "i32.npy", u8 = tmp / "u8.npy";
  {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = float(i % 1000);
    dafuse::data::save_npy<float>(f32, {n / 64, 64}, std::span<const float>(v));
    std::vector<std::int32_t> w(n);
    for (std::size_t i = 0; i < n; ++i) w[i] = std::int32_t(i % 1000) - 500;
    dafuse::data::save_npy<std::int32_t>(i32, {n}, std::span<const std::int32_t>(w));
    std::vector<std::uint8_t> u(n);
    for (std::size_t i = 0; i < n; ++i) u[i] = std::uint8_t(i * 7);
    dafuse::data::save_npy<std::uint8_t>(u8, {n / 256, 16, 16}, std::span<const std::uint8_t>(u));
  }
  const double array_bytes = double(n) * 4;
  {
    const dafuse::test::peak_memory peak;
    const host_array<float> a = dafuse::data::load_npy<float>(f32);
    REQUIRE(a.values.size() == n);
    CHECK(a.values[12345] == float(12345 % 1000));
    if (peak.usable()) CHECK(peak.growth_bytes() < 1.1 * array_bytes);  // was 2x
  }
  {
    const dafuse::test::peak_memory peak;
    const host_array<float> a = dafuse::data::load_npy_as_float(i32);
    REQUIRE(a.values.size() == n);
    CHECK(a.values[n - 1] == float(std::int32_t((n - 1) % 1000) - 500));
    if (peak.usable()) CHECK(peak.growth_bytes() < 1.1 * array_bytes);  // was 2x
  }
  {
    const dafuse::test::peak_memory peak;
    const host_array<float> a = dafuse::data::load_npy_as_float(u8);
    REQUIRE(a.values.size() == n);
    CHECK(a.values[n - 1] == float(std::uint8_t((n - 1) * 7)));
    if (peak.usable()) CHECK(peak.growth_bytes() < 1.1 * array_bytes);  // was 1.25x
  }
}

TEST_CASE("float64 features and int64 labels convert as they are read: the peak is the result's") {
  temp_dir tmp("npy_peak");
  const std::size_t n = std::size_t(8) << 20;  // 8 Mi values: 64 MiB files, 32 MiB results
  const fs::path f64 = tmp / "f64.npy", i64 = tmp / "i64.npy";
  {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = double(i % 1000) / 8;
    dafuse::data::save_npy<double>(f64, {n / 64, 64}, std::span<const double>(v));
  }
  {
    std::vector<std::int64_t> w(n);
    for (std::size_t i = 0; i < n; ++i) w[i] = std::int64_t(i % 10);
    dafuse::test::save_array_big_endian<std::int64_t>(i64, {n}, w);
  }
  const double result_bytes = double(n) * 4;
  {
    const dafuse::test::peak_memory peak;
    const host_array<float> a = dafuse::data::load_npy_as_float(f64);
    REQUIRE(a.values.size() == n);
    CHECK(a.values[n - 1] == float(double((n - 1) % 1000) / 8));
    // The bound the reader promises is the float64 file + the float32 array; it keeps 64 KiB.
    if (peak.usable()) CHECK(peak.growth_bytes() < 1.1 * result_bytes);
  }
  {
    const dafuse::test::peak_memory peak;
    const host_array<std::int32_t> a = dafuse::data::load_npy_as_int32(i64);
    REQUIRE(a.values.size() == n);
    CHECK(a.values[n - 1] == std::int32_t((n - 1) % 10));
    if (peak.usable()) CHECK(peak.growth_bytes() < 1.1 * result_bytes);
  }
}

TEST_CASE("an array larger than the machine's memory is refused before anything is allocated") {
  temp_dir tmp("npy_too_big");
  const fs::path path = tmp / "huge.npy";
  const std::uint64_t memory = dafuse::detail::physical_memory_bytes();
  const std::uint64_t count = memory / 4 + (std::uint64_t(1) << 24);
  const std::string header = padded_header("<f4", "(" + std::to_string(count) + ",)", 118);
  write_bytes(path, make_npy(1, header));
  // A sparse file of the promised size: the sizes agree, so only the memory check can refuse it.
  fs::resize_file(path, 128 + count * 4);
  const dafuse::test::peak_memory peak;
  CHECK_THROWS_WITH_AS(
      dafuse::data::load_npy<float>(path),
      doctest::Contains((path.string() + ": the values of shape (" + std::to_string(count) +
                         ",) of float32: expected at most this machine's memory")
                            .c_str()),
      dafuse::error);
  if (peak.usable()) CHECK(peak.growth_bytes() < 4e6);
}

}  // namespace data_npy_test
