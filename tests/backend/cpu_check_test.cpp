// SPDX-License-Identifier: Apache-2.0
// Tests for backend/host/cpu_check.hpp: missing_cpu_features lists, in table order, exactly the
// extensions this unit was compiled for that the CPU lacks, and stays NUL-terminated in a short
// buffer; compiled_cpu_features names them all; cpu_has agrees with the kernel's /proc/cpuinfo
// for every extension in the table, and says yes to each one this test (built with -march=native)
// was compiled for. The check's exit with its message on a CPU without an extension: cpu_check.sh.
#include <dafuse/backend/host/cpu_check.hpp>
#include "../check.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace backend_cpu_check_test {

namespace {

namespace host = dafuse::backend::host;

bool has_none(const host::cpu_feature&) noexcept {
  return false;
}
bool has_all(const host::cpu_feature&) noexcept {
  return true;
}
bool has_all_but_avx2(const host::cpu_feature& f) noexcept {
  return std::string(f.name) != "avx2";
}

//! The names of the table's extensions this unit was compiled for, space-separated.
std::string compiled_names() {
  std::string names;
  for (const host::cpu_feature& f : host::cpu_features) {
    if (!f.compiled_for) continue;
    names += (names.empty() ? "" : " ") + std::string(f.name);
  }
  return names;
}

}  // namespace

TEST_CASE("missing_cpu_features lists the compiled-for extensions the CPU lacks, in order") {
  char out[256];
  const std::string names = compiled_names();
  const int compiled =
      static_cast<int>(std::count(names.begin(), names.end(), ' ')) + (names.empty() ? 0 : 1);
  CHECK(host::missing_cpu_features(&has_none, out, sizeof out) == compiled);
  CHECK(std::string(out) == names);
  CHECK(host::missing_cpu_features(&has_all, out, sizeof out) == 0);
  CHECK(std::string(out).empty());
#ifdef __AVX2__
  CHECK(host::missing_cpu_features(&has_all_but_avx2, out, sizeof out) == 1);
  CHECK(std::string(out) == "avx2");
#else
  CHECK(host::missing_cpu_features(&has_all_but_avx2, out, sizeof out) == 0);
#endif
}

TEST_CASE("missing_cpu_features counts every missing extension and truncates its names whole") {
  char out[12];
  const int compiled = host::missing_cpu_features(&has_none, out, sizeof out);
  const std::string shown(out);
  CHECK(shown.size() < sizeof out);
  if (compiled > 0) {
    // Only whole names appear: the shown text is a prefix of the full list, ending at a name.
    const std::string names = compiled_names();
    REQUIRE(names.compare(0, shown.size(), shown) == 0);
    CHECK((shown.size() == names.size() || names[shown.size()] == ' '));
  }
  char none[1] = {'x'};
  host::missing_cpu_features(&has_none, none, 0);
  CHECK(none[0] == 'x');  // a zero size writes nothing
}

TEST_CASE("compiled_cpu_features names every compiled-for extension; this CPU lacks none") {
  char out[256];
  const std::string names = compiled_names();
  CHECK(host::compiled_cpu_features(out, sizeof out) ==
        host::missing_cpu_features(&has_none, out, sizeof out));
  CHECK(std::string(out) == names);
  // What a dispatching program asks each unit: the CPU running this test has all it was built for
  // (a test built for more exits 77 before main).
  CHECK(host::missing_cpu_features(out, sizeof out) == 0);
  CHECK(std::string(out).empty());
}

TEST_CASE("cpu_has agrees with /proc/cpuinfo and with what this test was compiled for") {
  for (const host::cpu_feature& f : host::cpu_features)
    if (f.compiled_for) CHECK_MESSAGE(host::cpu_has(f), f.name);
  // Elsewhere than x86 cpu_has checks nothing (and says yes); the /proc/cpuinfo that qemu-user
  // shows an emulated Arm program is the x86 host's.
  if (!DAFUSE_CPU_CHECK_X86) return;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line) && line.rfind("flags", 0) != 0) {
  }
  if (line.empty()) return;  // no /proc (not Linux): nothing more to compare with
  std::set<std::string> flags;
  std::istringstream words(line.substr(line.find(':') + 1));
  for (std::string w; words >> w;) flags.insert(w);
  for (const host::cpu_feature& f : host::cpu_features)
    CHECK_MESSAGE(host::cpu_has(f) == (flags.count(f.name) == 1), f.name);
}

}  // namespace backend_cpu_check_test
