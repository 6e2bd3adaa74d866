// SPDX-License-Identifier: Apache-2.0
// dafuse-train: trains a registry model, or a network given on the command line, on NPY data
// (--help). Exit status: 0 done, 1 a run-time error (bad data, I/O, memory), 2 a bad command
// line (or a network that does not compile), 3 a run that diverged.
//
// The program is dafuse_train_entry; main calls it, or, in a portable build (-Dcpu=portable),
// portable.cpp's main calls the copy of it built for the best instruction set this CPU has.
#include "config.hpp"
#include "jit.hpp"
#include "registry.hpp"

#include <dafuse/backend/host/cpu_check.hpp>
#include <dafuse/backend/host/gemm_bf16.hpp>
#include <dafuse/backend/host/gemm_fp32.hpp>
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>

#include <csignal>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

namespace {
void list_models() {
  std::printf("models (--model NAME; defaults: steps, batch, lr, momentum, lambda_max):\n");
  for (const dafuse_train::model_entry& m : dafuse_train::all_models()) {
    const std::string input =
        m.image.given()
            ? std::to_string(m.image.height) + "x" + std::to_string(m.image.width) + "x" +
                  std::to_string(m.image.channels) + " images (NPY [N, H, W(, C)])"
            : std::to_string(m.input_width) +
                  (m.sparse ? " features (CSR prefix)" : " features (NPY)");
    std::printf("  %-20s %s\n  %-20s input %s, %ld classes; defaults %ld, %ld, %g, %g, %g\n",
                std::string(m.name).c_str(), std::string(m.description).c_str(), "", input.c_str(),
                m.classes, m.defaults.steps, m.defaults.batch, m.defaults.lr, m.defaults.momentum,
                m.defaults.lambda_max);
  }
}
// The version and what the products run on: the instructions this program was compiled for and,
// in a portable build, which of its copies runs and why (`dispatch`).
void print_version(const char* dispatch) {
  namespace host = dafuse::backend::host;
  std::printf("dafuse-train %d.%d.%d\n", DAFUSE_VERSION_MAJOR, DAFUSE_VERSION_MINOR,
              DAFUSE_VERSION_PATCH);
  char features[256];
  host::compiled_cpu_features(features, sizeof features);
#ifdef DAFUSE_TRAIN_MARCH
  std::printf("compiled for: %s (%s)\n", DAFUSE_TRAIN_MARCH,
              features[0] ? features : "no extensions");
#else
  std::printf("compiled for: %s\n", features[0] ? features : "the compiler's default");
#endif
  std::printf("fp32 products: %s\n", host::fp32_kernel_name);
  std::printf("bf16 products: %s\n", host::bf16_products_native
                                         ? host::bf16_kernel_name
                                         : (std::string("bf16-rounded operands on the ") +
                                            host::fp32_kernel_name + " fp32 kernel")
                                               .c_str());
  std::printf("kernels chosen: %s\n",
              dispatch ? dispatch : "when compiled (this build does not dispatch at run time)");
}
}  // namespace

#ifdef DAFUSE_TRAIN_VARIANT
//! What a portable build's main asks each copy of the program before running it: the
//! extensions this copy was compiled for that the CPU lacks (cpu_check.hpp), in baseline code.
extern "C" DAFUSE_CPU_BASELINE int dafuse_train_missing_features(char* out,
                                                                 std::size_t size) noexcept {
  return dafuse::backend::host::missing_cpu_features(out, size);
}
#endif

//! The program: argc and argv as main has them; `dispatch` says which copy of a portable build
//! runs and why (nullptr in a build for one instruction set).
extern "C" int dafuse_train_entry(int argc, char** argv, const char* dispatch) {
  // A file size limit (ulimit -f) then makes a write fail with EFBIG, which is reported and
  // leaves the old file, instead of killing the program in the middle of a save.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    const dafuse_train::config c = dafuse_train::parse(argc, argv);
    if (c.help) {
      std::printf("%s\n", dafuse_train::usage().c_str());
      list_models();
      return 0;
    }
    if (c.list) {
      list_models();
      return 0;
    }
    if (c.version) {
      print_version(dispatch);
      return 0;
    }
    if (c.network.given()) {
      const std::string type = dafuse_train::step_type_text(c.network);
      if (const dafuse_train::compiled_entry* e = dafuse_train::compiled_network();
          e && e->step_type == type)
        return e->model.run(c, e->model);
      dafuse_train::run_network_program(c, type, argv);
    }
    for (const dafuse_train::model_entry& m : dafuse_train::all_models())
      if (m.name == c.model) return m.run(c, m);
    std::string names;
    for (const dafuse_train::model_entry& m : dafuse_train::all_models())
      names.append(names.empty() ? "" : ", ").append(m.name);
    throw dafuse_train::usage_error("--model: expected one of " + names + ", found '" + c.model +
                                    "'");
  } catch (const dafuse_train::network_error& e) {
    std::fprintf(stderr, "dafuse-train: %s\n", e.what());
    return 2;
  } catch (const dafuse_train::usage_error& e) {
    std::fprintf(stderr, "dafuse-train: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "dafuse-train: out of memory while %s\n",
                 dafuse_train::activity().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dafuse-train: %s\n", e.what());
    return 1;
  }
}

#ifndef DAFUSE_TRAIN_VARIANT
int main(int argc, char** argv) {
  return dafuse_train_entry(argc, argv, nullptr);
}
#endif
