// SPDX-License-Identifier: Apache-2.0
// dafuse-train: trains a registry model, or a network given on the command line, on NPY data
// (--help). Exit status: 0 done, 1 a run-time error (bad data, I/O, memory), 2 a bad command
// line (or a network that does not compile), 3 a run that diverged.
#include "config.hpp"
#include "jit.hpp"
#include "registry.hpp"

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
}  // namespace

int main(int argc, char** argv) {
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
    if (c.network.given()) {
      const std::string type = dafuse_train::step_type_text(c.network);
      if (const dafuse_train::compiled_entry* e = dafuse_train::compiled_network();
          e && e->step_type == type)
        return e->model.run(c, e->model);
      dafuse_train::run_network_program(c.network, type, argv);
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
