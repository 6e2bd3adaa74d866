// SPDX-License-Identifier: Apache-2.0
// dafuse-train built with -Dcpu=portable: one copy of the program for each x86-64 instruction set
// (portable_isolate.py links each into an object of its own), and this main, compiled for the
// baseline, which runs the best copy this CPU can run. DAFUSE_KERNELS=baseline|avx2|avx512 asks
// for a given copy instead (to compare them, or to test one on a CPU that has more).
#define DAFUSE_NO_CPU_CHECK
#include <dafuse/backend/host/cpu_check.hpp>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" {
// The copies' entries and their CPU checks, renamed apart (main.cpp; portable_isolate.py).
int dafuse_train_entry_avx512(int, char**, const char*);
int dafuse_train_entry_avx2(int, char**, const char*);
int dafuse_train_entry_baseline(int, char**, const char*);
int dafuse_train_missing_features_avx512(char*, std::size_t) noexcept;
int dafuse_train_missing_features_avx2(char*, std::size_t) noexcept;
int dafuse_train_missing_features_baseline(char*, std::size_t) noexcept;

// Each copy's static initialisers (its .init_array, renamed by portable_isolate.py), which the
// linker brackets with __start_ and __stop_ symbols; weak, as a copy may have none.
using initialiser = void (*)();
#define DAFUSE_COPY_INITIALISERS(name)                                         \
  extern const initialiser __start_dafuse_init_##name[] __attribute__((weak)); \
  extern const initialiser __stop_dafuse_init_##name[] __attribute__((weak));
DAFUSE_COPY_INITIALISERS(avx512)
DAFUSE_COPY_INITIALISERS(avx2)
DAFUSE_COPY_INITIALISERS(baseline)
#undef DAFUSE_COPY_INITIALISERS
}

namespace {

struct copy {
  const char* name;
  int (*entry)(int, char**, const char*);
  int (*missing)(char*, std::size_t) noexcept;
  const initialiser *init_begin, *init_end;
};

// Best first; the -march of each is in meson.build (portable_variants).
const copy copies[] = {
    {"avx512", dafuse_train_entry_avx512, dafuse_train_missing_features_avx512,
     __start_dafuse_init_avx512, __stop_dafuse_init_avx512},
    {"avx2", dafuse_train_entry_avx2, dafuse_train_missing_features_avx2, __start_dafuse_init_avx2,
     __stop_dafuse_init_avx2},
    {"baseline", dafuse_train_entry_baseline, dafuse_train_missing_features_baseline,
     __start_dafuse_init_baseline, __stop_dafuse_init_baseline},
};

}  // namespace

int main(int argc, char** argv) {
  const char* wanted = std::getenv("DAFUSE_KERNELS");
  if (wanted && *wanted == '\0') wanted = nullptr;
  std::string names, passed;
  for (const copy& c : copies) names.append(names.empty() ? "" : ", ").append(c.name);
  for (const copy& c : copies) {
    if (wanted && std::strcmp(wanted, c.name) != 0) continue;
    char missing[256];
    if (c.missing(missing, sizeof missing) > 0) {
      if (wanted) {
        std::fprintf(stderr,
                     "dafuse-train: DAFUSE_KERNELS=%s: this CPU lacks %s, which those kernels "
                     "need (unset DAFUSE_KERNELS to pick the best this CPU runs)\n",
                     wanted, missing);
        return 2;
      }
      passed.append(passed.empty() ? "" : "; ").append(c.name).append(" needs ").append(missing);
      continue;
    }
    const std::string why = wanted           ? std::string("DAFUSE_KERNELS=") + wanted
                            : passed.empty() ? std::string("the best this CPU runs")
                                             : "the best this CPU runs (" + passed + ")";
    const std::string dispatch = std::string(c.name) + ", at start-up, of " + names + ": " + why;
    // The chosen copy's static initialisers run now, in link order, as the loader would have.
    for (const initialiser* f = c.init_begin; f != c.init_end; ++f) (*f)();
    return c.entry(argc, argv, dispatch.c_str());
  }
  if (wanted) {
    std::fprintf(stderr, "dafuse-train: DAFUSE_KERNELS: expected one of %s, found '%s'\n",
                 names.c_str(), wanted);
    return 2;
  }
  std::fprintf(stderr,
               "dafuse-train: this CPU runs none of this build's kernels (%s); build dafuse-train "
               "on it with -Dcpu=native\n",
               passed.c_str());
  return 1;
}
