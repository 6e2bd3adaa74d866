// SPDX-License-Identifier: Apache-2.0
//! @file dafuse.hpp
//! @brief The umbrella header: everything a user needs to describe, train and evaluate a DANN.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/select.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/profiler.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/core/system.hpp>
#include <dafuse/data/batch_draws.hpp>
#include <dafuse/data/batcher.hpp>
#include <dafuse/data/csr.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/images.hpp>
#include <dafuse/data/npy.hpp>
#include <dafuse/data/npy_map.hpp>
#include <dafuse/data/prefetch.hpp>
#include <dafuse/data/sampler.hpp>
#include <dafuse/data/split.hpp>
#include <dafuse/data/transform.hpp>
#include <dafuse/head/cdan.hpp>
#include <dafuse/head/dann.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/nn/activation.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/dense.hpp>
#include <dafuse/nn/grad_reversal.hpp>
#include <dafuse/nn/init.hpp>
#include <dafuse/nn/loss.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/clip.hpp>
#include <dafuse/policy/loader.hpp>
#include <dafuse/policy/optim.hpp>
#include <dafuse/policy/precision.hpp>
#include <dafuse/policy/schedule.hpp>
#include <dafuse/select/validators.hpp>
#include <dafuse/step/eager_step.hpp>
#include <dafuse/step/train_step.hpp>
#include <dafuse/train/checkpoint.hpp>
#include <dafuse/train/curves.hpp>
#include <dafuse/train/fit.hpp>
