// SPDX-License-Identifier: Apache-2.0
// dafuse-train's networks of any width: the step type of a network given on the command line is
// compiled once into a program of its own (a unit holding that step's registry entry, linked with
// the rest of dafuse-train prebuilt), cached, and run in place of this process (docs/cli.md,
// "Compiled networks").
#pragma once
#include "config.hpp"
#include "network.hpp"

#include <stdexcept>
#include <string>

namespace dafuse_train {

//! A compiled network program's step does not compile: the message is the compiler's first
//! `dafuse:` line (exit status 2, as a refused command line).
struct network_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

//! Runs the program of the network of `c` (c.network, step type `type`) with this process's
//! arguments, compiling and caching it first if no cached one exists: replaces this process and
//! returns only by throwing (data that does not fit the network, found before any compile; a
//! failed compilation; an unusable cache).
[[noreturn]] void run_network_program(const config& c, const std::string& type, char** argv);

}  // namespace dafuse_train
