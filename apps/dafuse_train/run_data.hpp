// SPDX-License-Identifier: Apache-2.0
// dafuse-train's data of a run: the NPY or CSR files of both domains and the target test set
// loaded and checked, conversions on load said, --preprocess fitted and applied. Defined once in
// run_data.cpp (the prebuilt part, meson.build), not in each unit that runs a step (run.hpp).
#pragma once
#include "config.hpp"
#include "registry.hpp"

#include <dafuse/data/csr.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/preprocessing.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dafuse_train {

//! Data of one run, dense (data::dataset) or sparse (data::sparse_dataset).
template <class Data>
struct run_data {
  Data source, target;
  std::optional<Data> target_test;  //!< --target-test: reported on, never trained on
};

//! Dense rows from an NPY file (images [N, H, W] are flattened; uint8 pixels scaled by 1/255).
dafuse::data::dataset load_dense(const std::string& features,
                                 const std::string& labels,
                                 dafuse::data::domain side);

//! A conv net reads images of one shape: refuses an NPY file `features` of another before it is
//! loaded (rows of H·W·C features would have the width, but not necessarily the layout). Other
//! faults of the file are left to the loader, which names them.
void check_image_file(const std::string& features,
                      const image_shape& image,
                      std::string_view model);

//! CSR rows from a prefix P (P_indptr.npy, P_indices.npy, P_data.npy), labels P_labels.npy unless
//! given.
dafuse::data::sparse_dataset load_sparse(const std::string& prefix,
                                         std::string labels,
                                         dafuse::data::domain side,
                                         long width,
                                         bool labels_required);

//! Says on stderr which data files of the run were converted on load ("X.npy: float64 converted
//! to float32"): features as float32, labels and CSR offsets and columns as int32 (numpy saves
//! float64 and int64 by default). uint8 features are left unsaid (images scaled by 1/255), and
//! so is a file whose header cannot be read.
void note_conversions(const config& c, bool sparse);

//! Applies --preprocess to both domains and the target test set, if any (dense): each transform
//! fitted on the training data only. Returns what was fitted, for the model file.
dafuse::data::preprocessing preprocess(const std::vector<std::string>& steps,
                                       run_data<dafuse::data::dataset>& d);

//! The same for CSR rows (transforms that keep zeros zero).
dafuse::data::preprocessing preprocess(const std::vector<std::string>& steps,
                                       run_data<dafuse::data::sparse_dataset>& d);

}  // namespace dafuse_train
