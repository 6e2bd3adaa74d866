// SPDX-License-Identifier: Apache-2.0
//! @file policy/loader.hpp
//! @brief The loader slot: how a step's batch gets into the step's memory.
//!
//! Whatever the loader, source and target rows are drawn by two seeded infinite samplers
//! (data/sampler.hpp), so the same seed gives the same batches with every loader and backend.
//! The batch assembly itself lives in data/batcher.hpp (and data/prefetch.hpp for the workers).
#pragma once
#include <dafuse/config.hpp>

#include <concepts>

namespace dafuse::loader {

//! The caller's thread assembles each batch on the host (PyTorch's num_workers=0) and copies it
//! into the step's input. Simple and predictable; the step waits while the batch is built.
struct sync {
  using loader_tag = void;                            //!< fills the loader slot
  static constexpr bool data_in_step_memory = false;  //!< data stays in host memory
};

//! The whole data set is copied once into the step's memory; each batch is gathered there by
//! index, with no host copy per step. The right choice for feature-level DA, where data sets
//! are megabytes.
struct resident {
  using loader_tag = void;                           //!< fills the loader slot
  static constexpr bool data_in_step_memory = true;  //!< data copied to the step's system
};

//! Workers persistent threads assemble batches (index draws, row gathering, labels) on the host
//! into a ring of Depth staging buffers while the step runs; each fill copies the next ready batch
//! into the step's input, so the step waits only when the workers fall behind (PyTorch's
//! num_workers=Workers, prefetch_factor≈Depth/Workers). Batches come out in the order they were
//! drawn: bitwise those of loader::sync for the same seed, whatever Workers and Depth.
template <int Workers = 2, int Depth = 4>
struct prefetch {
  static_assert(Workers >= 1,
                "dafuse: loader::prefetch<Workers, Depth> needs Workers >= 1 worker thread; for no "
                "worker threads use loader::sync");
  static_assert(
      Depth >= 2,
      "dafuse: loader::prefetch<Workers, Depth> needs Depth >= 2 buffers, so a worker can "
      "fill one while the caller copies out of another");
  using loader_tag = void;                            //!< fills the loader slot
  static constexpr bool data_in_step_memory = false;  //!< data stays in host memory
  static constexpr int workers = Workers;             //!< persistent threads assembling batches
  static constexpr int depth = Depth;                 //!< staging buffers in the ring
};

}  // namespace dafuse::loader

namespace dafuse {

//! A loader policy: says it fills the loader slot and where the data set lives.
template <class L>
concept loader_policy = requires {
  typename L::loader_tag;
  { L::data_in_step_memory } -> std::convertible_to<bool>;
};

static_assert(loader_policy<loader::sync>);
static_assert(loader_policy<loader::resident>);
static_assert(loader_policy<loader::prefetch<>>);

}  // namespace dafuse
