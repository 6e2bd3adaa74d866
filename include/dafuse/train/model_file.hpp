// SPDX-License-Identifier: Apache-2.0
//! @file train/model_file.hpp
//! @brief Model files: a network's weights by module and layer name, in one NumPy `.npz`.
//!
//! A model file holds what a trained network is, not how it was trained: no optimizer state,
//! step index or loader position (those are a checkpoint's, train/checkpoint.hpp). Any step or
//! model of the same network reads it, whatever its policies or precision. Members (numpy.savez
//! layout, so `numpy.load` opens it):
//!
//!     features.<i>.weight.npy       float32 [out, in]   layer i of G_f (torch.nn.Linear's layout)
//!     features.<i>.bias.npy         float32 [out]
//!     classifier.<i>.weight.npy, classifier.<i>.bias.npy        G_y
//!     discriminator.<i>.weight.npy, discriminator.<i>.bias.npy  G_d
//!     preprocess.<i>.mean.npy       float64 [width]     standardize's statistics, when step i of
//!     preprocess.<i>.stddev.npy     float64 [width]     the preprocessing is standardize
//!     architecture.json             the layers' widths and activations, the input form, and
//!                                   the preprocessing raw rows go through ("preprocess")
//!
//! Versions ("format_version" in architecture.json): 1 holds the network alone; 2 adds the
//! preprocessing (data/preprocessing.hpp), and is written only for a model that has some, so a
//! model without any is the version 1 file it always was. A reader that knows version 1 only
//! refuses a version 2 file instead of running its network on rows that skipped the transform.
//!
//! A conv net (nn/conv2d.hpp) is written as PyTorch's NCHW modules hold it, so that
//! `load_state_dict` takes the arrays as they are: a convolution's weight is torch.nn.Conv2d's
//! [C_out, C_in, K, K] (dafuse's is [C_out, K, K, C_in] column-major), a max-pooling layer has no
//! members (its index is skipped), and a dense layer right after the image layers has its columns
//! in torch.nn.Flatten's C·H·W order (dafuse's flattened NHWC image is H·W·C). The architecture
//! gives such layers a "kind" ("conv2d", "max_pool2d") and their shapes.
//!
//! Loading checks everything before it writes anything: each member's CRC-32, dtype, shape and
//! finiteness, the architecture field by field (when the file has one: a file written elsewhere
//! may carry the arrays alone), and that no layer is missing, extra or given twice. It reads
//! only the members the network needs, by name (data::npz_archive), an architecture.json of at
//! most model_architecture_max_bytes, in time linear in its size; text from the file reaches
//! messages with control bytes escaped.
//! tools/check_model_export.py loads a model file into the equivalent PyTorch module and checks
//! that both predict the same classes.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/data/npy.hpp>
#include <dafuse/data/npz.hpp>
#include <dafuse/data/preprocessing.hpp>
#include <dafuse/nn/activation.hpp>
#include <dafuse/nn/conv2d.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/step/model.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace dafuse {

//! The newest version of the model file's layout, in its architecture.json ("format_version"):
//! see the file's comment (version 1 is written for a model without preprocessing).
inline constexpr int model_file_version = 2;

namespace detail {

//! An activation's fields in a layer of the architecture; PyTorch's names.
template <auto Act>
std::string activation_json() {
  using A = std::remove_cvref_t<decltype(Act)>;
  if constexpr (std::is_same_v<A, nn::identity_t>) {
    return "\"activation\": \"identity\"";
  } else if constexpr (std::is_same_v<A, nn::relu_t>) {
    return "\"activation\": \"relu\"";
  } else if constexpr (std::is_same_v<A, nn::leaky_relu_t>) {
    char slope[32];
    const auto r = std::to_chars(slope, slope + sizeof slope, Act.negative_slope);
    return "\"activation\": \"leaky_relu\", \"negative_slope\": " + std::string(slope, r.ptr);
  } else if constexpr (std::is_same_v<A, nn::sigmoid_t>) {
    return "\"activation\": \"sigmoid\"";
  } else if constexpr (std::is_same_v<A, nn::tanh_t>) {
    return "\"activation\": \"tanh\"";
  } else {
    return "\"activation\": \"custom\"";  // a user's own: no equivalent elsewhere is known
  }
}

//! The three modules' names in a model file, in buffer order.
inline constexpr std::array<std::pair<nn::dann_module, std::string_view>, 3> model_modules{{
    {nn::dann_module::features, "features"},
    {nn::dann_module::classifier, "classifier"},
    {nn::dann_module::discriminator, "discriminator"},
}};

//! One layer of the architecture: widths and activation; an image layer's kind and shapes too.
template <class L>
std::string layer_json() {
  const auto field = [](std::string_view name, index_t v) {
    return ", \"" + std::string(name) + "\": " + std::to_string(v);
  };
  std::string s = "{";
  if constexpr (nn::kind_of<L>() == nn::layer_kind::conv2d)
    s += "\"kind\": \"conv2d\", \"in_height\": " + std::to_string(L::in_height) +
         field("in_width", L::in_width) + field("in_channels", L::in_channels) +
         field("out_channels", L::out_channels) + field("kernel", L::kernel) +
         field("stride", L::stride) + field("padding", L::padding) + ", ";
  else if constexpr (nn::kind_of<L>() == nn::layer_kind::max_pool2d)
    s += "\"kind\": \"max_pool2d\", \"in_height\": " + std::to_string(L::in_height) +
         field("in_width", L::in_width) + field("channels", L::channels) +
         field("kernel", L::kernel) + ", ";
  s += "\"in\": " + std::to_string(L::in) + field("out", L::out);
  if constexpr (nn::kind_of<L>() != nn::layer_kind::max_pool2d)
    s += ", " + activation_json<L::act>();
  return s + "}";
}

template <class Stack>
std::string stack_json() {
  std::string s = "[";
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((s += (I ? ", " : "") + layer_json<typename Stack::template layer<I>>()), ...);
  }
  (std::make_index_sequence<Stack::depth>{});
  return s + "]";
}

//! An image layer's output shape (H, W, C); a dense layer's is (1, 1, out).
template <class L>
constexpr std::array<index_t, 3> output_image() {
  if constexpr (nn::kind_of<L>() == nn::layer_kind::conv2d)
    return {L::out_height, L::out_width, L::out_channels};
  else if constexpr (nn::kind_of<L>() == nn::layer_kind::max_pool2d)
    return {L::out_height, L::out_width, L::channels};
  else
    return {1, 1, L::out};
}

//! Where layer I of Stack keeps weight (o, j) of the file's row-major [out, in] (or, for a
//! convolution, [C_out, C_in, K, K]) array, j the flat index of a row: the offset in its W.
//!   dense:  W[o + out·j'], j' the HWC index of the file's CHW index j when the layer reads the
//!           flattened output (H, W, C) of an image layer, else j' = j;
//!   conv2d: j = (c·K + kh)·K + kw ↦ W(o, kh, kw, c) = W[o + C_out·(c + C_in·(kw + K·kh))].
template <class Stack, std::size_t I>
constexpr index_t stored_weight_index(index_t o, index_t j) {
  using L = typename Stack::template layer<I>;
  if constexpr (nn::kind_of<L>() == nn::layer_kind::conv2d) {
    const index_t k = L::kernel, kw = j % k, kh = (j / k) % k, c = j / (k * k);
    return o + L::out_channels * (c + L::in_channels * (kw + k * kh));
  } else {
    if constexpr (I > 0) {
      using below = typename Stack::template layer<I - 1>;
      if constexpr (nn::kind_of<below>() != nn::layer_kind::dense) {
        constexpr std::array<index_t, 3> hwc = output_image<below>();
        const index_t hw = hwc[0] * hwc[1], c = j / hw, pixel = j % hw;
        return o + L::out * (pixel * hwc[2] + c);
      }
    }
    return o + L::out * j;
  }
}

//! The shape of layer L's weight member: [out, in], or a convolution's [C_out, C_in, K, K].
template <class L>
std::vector<std::size_t> weight_shape() {
  if constexpr (nn::kind_of<L>() == nn::layer_kind::conv2d)
    return {std::size_t(L::out_channels), std::size_t(L::in_channels), std::size_t(L::kernel),
            std::size_t(L::kernel)};
  else
    return {std::size_t(L::weight_rows), std::size_t(L::weight_cols)};
}

template <class Net, std::size_t M, class F, std::size_t... I>
void for_each_layer_of_module(F& f, std::index_sequence<I...>) {
  constexpr nn::dann_module module = model_modules[M].first;
  using stack = typename Net::template stack<module>;
  (f.template operator()<stack, I>(model_modules[M].second, Net::template offset<module>), ...);
}
template <class Net, class F, std::size_t... M>
void for_each_module(F& f, std::index_sequence<M...>) {
  (for_each_layer_of_module<Net, M>(
       f, std::make_index_sequence<Net::template stack<model_modules[M].first>::depth>{}),
   ...);
}
//! Calls f.operator()<Stack, I>(module name, module offset) for every layer I of every module, in
//! buffer order.
template <class Net, class F>
void for_each_model_layer(F&& f) {
  for_each_module<Net>(f, std::make_index_sequence<model_modules.size()>{});
}

inline std::string layer_member(std::string_view module, std::size_t i, std::string_view what) {
  return std::string(module) + "." + std::to_string(i) + "." + std::string(what) + ".npy";
}

//! A shape as numpy prints it: (2, 3), (5,).
inline std::string tuple_text(std::span<const std::size_t> shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

//! The leaves of a JSON document (objects, arrays, strings, numbers, true, false, null) as
//! (path, value as written) in document order: {"a": [{"b": 1}]} gives ("a[0].b", "1"). Enough
//! to compare two architectures field by field and name the first that differs. A path given
//! twice is refused; lookups by path are hashed, so reading is linear in the document's size.
class json_leaves {
 public:
  json_leaves(std::string_view text, std::string where) : text_(text), where_(std::move(where)) {
    value("");
    skip_space();
    if (at_ != text_.size()) error("the end of the document");
  }
  const std::vector<std::pair<std::string, std::string>>& leaves() const { return leaves_; }
  //! The value at `path` as written, or nullptr.
  const std::string* find(const std::string& path) const {
    const auto it = index_.find(path);
    return it == index_.end() ? nullptr : &leaves_[it->second].second;
  }

 private:
  //! The most bytes of paths built in all: a long key above a long array is copied into each of
  //! its elements' paths, so a short document could otherwise ask for gigabytes.
  static constexpr std::size_t path_bytes_limit = std::size_t(16) << 20;

  [[noreturn]] void error(std::string_view expected) const {
    const std::string_view rest = text_.substr(at_, 16);
    fail(where_, "JSON", expected,
         (rest.empty() ? std::string("the end") : quoted_bytes(rest)) + " at offset " +
             std::to_string(at_));
  }
  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\t' || text_[at_] == '\r'))
      ++at_;
  }
  bool take(char c) {
    skip_space();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  std::string string_token() {
    if (!take('"')) error("a string");
    std::string s;
    while (at_ < text_.size() && text_[at_] != '"') {
      if (text_[at_] == '\\') {
        if (++at_ >= text_.size()) break;
      }
      s += text_[at_++];
    }
    if (at_ >= text_.size()) error("a closing quote");
    ++at_;
    return s;
  }
  void value(const std::string& path) {
    if (++depth_ > 32) error("at most 32 levels of nesting");
    path_bytes_ += path.size();
    if (path_bytes_ > path_bytes_limit)
      error("at most " + std::to_string(path_bytes_limit) +
            " bytes of field paths in all (long keys above long arrays)");
    skip_space();
    if (take('{')) {
      if (!take('}')) {
        do {
          const std::string key = string_token();
          if (!take(':')) error("':' after a key");
          value(path.empty() ? key : path + "." + key);
        } while (take(','));
        if (!take('}')) error("',' or '}'");
      }
    } else if (take('[')) {
      if (!take(']')) {
        std::size_t i = 0;
        do value(path + "[" + std::to_string(i++) + "]");
        while (take(','));
        if (!take(']')) error("',' or ']'");
      }
    } else if (at_ < text_.size() && text_[at_] == '"') {
      leaf(path, "\"" + string_token() + "\"");
    } else {
      const std::size_t start = at_;
      while (at_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[at_])) ||
                                    text_[at_] == '-' || text_[at_] == '+' || text_[at_] == '.'))
        ++at_;
      if (at_ == start) error("a value");
      leaf(path, std::string(text_.substr(start, at_ - start)));
    }
    --depth_;
  }
  void leaf(const std::string& path, std::string v) {
    if (!index_.emplace(path, leaves_.size()).second)
      fail(where_, shown(path), "each field once", "it twice");
    leaves_.emplace_back(path, std::move(v));
  }

  std::string_view text_;
  std::string where_;
  std::size_t at_ = 0;
  int depth_ = 0;
  std::size_t path_bytes_ = 0;
  std::vector<std::pair<std::string, std::string>> leaves_;
  std::unordered_map<std::string, std::size_t> index_;  // path -> leaves_ index
};

//! Compares a file's architecture.json (read as `found`) with the network's, field by field (in
//! any key order); fails naming the first field that differs, the file's text escaped.
inline void check_architecture(std::string_view expected_json,
                               const json_leaves& found,
                               const std::string& where) {
  const json_leaves expected(expected_json, where);
  for (const auto& [path, value] : expected.leaves()) {
    const std::string* f = found.find(path);
    if (!f) fail(where, path, value + " (a network of another shape?)", "no such field");
    if (*f != value) fail(where, path, value, shown(*f));
  }
  for (const auto& [path, value] : found.leaves())
    if (!expected.find(path))
      fail(where, shown(path), "no such field (a network of another shape?)", shown(value));
}

}  // namespace detail

namespace detail {

//! The member holding array `what` ("mean", "stddev") of preprocessing step `i`.
inline std::string preprocess_member(std::size_t i, std::string_view what) {
  return "preprocess." + std::to_string(i) + "." + std::string(what) + ".npy";
}

//! architecture.json's "preprocess" list: each step's transform, its arrays' members, its
//! threshold.
inline std::string preprocess_json(const data::preprocessing& p) {
  std::string s = "[";
  for (std::size_t i = 0; i < p.steps().size(); ++i) {
    const data::preprocess_step& step = p.steps()[i];
    s += std::string(i ? ", " : "") + "{\"transform\": \"" + std::string(data::name(step.kind)) +
         "\"";
    if (step.kind == data::preprocess_kind::standardize)
      s += ", \"mean\": \"" + preprocess_member(i, "mean") + "\", \"stddev\": \"" +
           preprocess_member(i, "stddev") + "\"";
    if (step.kind == data::preprocess_kind::binarize) {
      char t[32];
      const auto r = std::to_chars(t, t + sizeof t, step.threshold);
      s += ", \"threshold\": " + std::string(t, r.ptr);
    }
    s += "}";
  }
  return s + "]";
}

}  // namespace detail

//! The architecture.json a model file of `Net` carries (one line): what a loader checks and what
//! tools/check_model_export.py builds the PyTorch module from. With preprocessing `p` (version 2)
//! it lists p's steps; without, it is version 1's.
template <class Net>
std::string model_architecture(const data::preprocessing& p = {}) {
  return std::string("{\"format\": \"dafuse-model\", \"format_version\": ") +
         std::to_string(p.empty() ? 1 : model_file_version) +
         ", \"input\": {\"width\": " + std::to_string(Net::input_width) +
         ", \"sparse\": " + (Net::sparse_input ? "true" : "false") + "}" +
         (p.empty() ? std::string() : ", \"preprocess\": " + detail::preprocess_json(p)) +
         ", \"modules\": {" + "\"features\": " + detail::stack_json<typename Net::feature_stack>() +
         ", \"classifier\": " + detail::stack_json<typename Net::classifier_stack>() +
         ", \"discriminator\": " + detail::stack_json<typename Net::discriminator_stack>() + "}}";
}

//! Writes `m`'s weights, and its preprocessing if it has any, to `path` as a model file (through
//! a temporary file renamed over it).
template <class Net>
void save_model(const std::filesystem::path& path, const model<Net>& m) {
  const std::string where = path.string();
  const std::span<const float> p = m.parameters();
  std::vector<data::npz_member> members;
  detail::for_each_model_layer<Net>([&]<class Stack, std::size_t I>(
                                        [[maybe_unused]] std::string_view module,
                                        [[maybe_unused]] index_t offset) {
    using L = typename Stack::template layer<I>;
    if constexpr (L::param_count > 0) {
      const float* w = p.data() + offset + Stack::template param_offset<I>();
      // W is column-major here and row-major in torch (a conv's in NCHW order): a permutation.
      std::vector<float> weight(static_cast<std::size_t>(L::weight_count));
      for (index_t o = 0; o < L::weight_rows; ++o)
        for (index_t j = 0; j < L::weight_cols; ++j)
          weight[std::size_t(o * L::weight_cols + j)] =
              w[detail::stored_weight_index<Stack, I>(o, j)];
      members.push_back({detail::layer_member(module, I, "weight"),
                         data::npy_bytes<float>(detail::weight_shape<L>(),
                                                std::span<const float>(weight), where)});
      members.push_back(
          {detail::layer_member(module, I, "bias"),
           data::npy_bytes<float>(
               {std::size_t(L::bias_count)},
               std::span<const float>(w + L::weight_count, std::size_t(L::bias_count)), where)});
    }
  });
  const data::preprocessing& pre = m.preprocessing();
  for (std::size_t i = 0; i < pre.steps().size(); ++i) {
    const data::preprocess_step& step = pre.steps()[i];
    if (step.kind != data::preprocess_kind::standardize) continue;
    for (const auto& [what, v] : {std::pair{"mean", &step.mean}, {"stddev", &step.stddev}})
      members.push_back({detail::preprocess_member(i, what),
                         data::npy_bytes<double>({v->size()}, std::span<const double>(*v), where)});
  }
  const std::string architecture = model_architecture<Net>(pre);
  members.push_back({"architecture.json", {architecture.begin(), architecture.end()}});
  data::save_npz(path, members);
}

//! Writes the weights of `step` (a train_step or eager_step) as a model file.
template <class Step>
requires requires {
  typename Step::net_type;
}
void save_model(const std::filesystem::path& path, const Step& step) {
  save_model(path, model_of(step));
}

//! The most bytes a model file's architecture.json may hold before it is read: the deepest
//! network dafuse-train compiles (64 layers a module) writes about 20 KB.
inline constexpr std::uint64_t model_architecture_max_bytes = std::uint64_t(1) << 20;

namespace detail {

//! Names of an archive's members for a message: the first few, escaped, then how many more.
inline std::string member_list(std::span<const data::npz_entry> entries) {
  constexpr std::size_t shown_at_most = 12;
  if (entries.empty()) return "no members";
  std::string s;
  for (std::size_t i = 0; i < entries.size() && i < shown_at_most; ++i)
    s += (i ? ", " : "") + shown(entries[i].name);
  if (entries.size() > shown_at_most)
    s += " and " + std::to_string(entries.size() - shown_at_most) + " more";
  return s;
}

//! The preprocessing a model file's architecture.json lists ("preprocess[i].transform", ...),
//! standardize's statistics read from their members; each member read is added to `known`.
//! Fails naming the field or member that is not what a model of `width` features needs.
inline data::preprocessing read_preprocessing(const json_leaves& architecture,
                                              const data::npz_archive& archive,
                                              index_t width,
                                              const std::string& where,
                                              std::unordered_set<std::string>& known) {
  data::preprocessing p;
  const std::string json = where + ": architecture.json";
  for (std::size_t i = 0;; ++i) {
    const std::string at = "preprocess[" + std::to_string(i) + "]";
    const auto field = [&](std::string_view key) {
      return architecture.find(at + "." + std::string(key));
    };
    const std::string* transform = field("transform");
    if (!transform) break;
    const std::string kinds =
        "\"standardize\", \"l2\", \"log1p\", \"binarize\" or \"binarize_nonzero\"";
    std::optional<data::preprocess_kind> kind;
    for (const data::preprocess_kind k :
         {data::preprocess_kind::standardize, data::preprocess_kind::l2,
          data::preprocess_kind::log1p, data::preprocess_kind::binarize,
          data::preprocess_kind::binarize_nonzero})
      if (*transform == "\"" + std::string(data::name(k)) + "\"") kind = k;
    if (!kind) fail(json, at + ".transform", kinds, shown(*transform));
    if (*kind == data::preprocess_kind::standardize) {
      const auto statistic = [&](std::string_view what) {
        const std::string name = preprocess_member(i, what);
        known.insert(name);
        const data::npz_entry* found = archive.find(name);
        if (!found)
          fail(where, name,
               "a member holding standardize's " + std::string(what) + " (float64 [" +
                   std::to_string(width) + "])",
               "none");
        data::host_array<double> a =
            data::parse_npy<double>(archive.read(*found), where + ": " + name);
        if (a.shape != std::vector<std::size_t>{std::size_t(width)})
          fail(where + ": " + name, "shape", "(" + std::to_string(width) + ",)",
               tuple_text(a.shape));
        for (std::size_t k = 0; k < a.values.size(); ++k)
          if (!std::isfinite(a.values[k]) || (what == "stddev" && a.values[k] < 0))
            fail(where + ": " + name, "values[" + std::to_string(k) + "]",
                 what == "stddev" ? "a finite value >= 0" : "a finite value",
                 std::to_string(a.values[k]));
        return std::move(a.values);
      };
      data::feature_stats s;
      s.origin = where;
      s.mean = statistic("mean");
      s.stddev = statistic("stddev");
      p.add_standardize(s);
    } else {
      float threshold = 0.0f;
      if (const std::string* t = field("threshold")) {
        const auto r = std::from_chars(t->data(), t->data() + t->size(), threshold);
        if (r.ec != std::errc() || r.ptr != t->data() + t->size() || !std::isfinite(threshold))
          fail(json, at + ".threshold", "a finite number", shown(*t));
      }
      p.add(*kind, threshold);
    }
  }
  return p;
}

}  // namespace detail

//! Reads the model file at `path` into a model of `Net`, with the preprocessing the file carries
//! (version 2), which the model then applies to every row it reads. Fails, naming the file, the
//! member or field and what was expected, if the file is not a model of exactly this network.
template <class Net>
model<Net> load_model(const std::filesystem::path& path) {
  const std::string where = path.string();
  // Only the members the network needs are read, each checked when it is; the archive has
  // already refused names given twice and members sharing bytes.
  const data::npz_archive archive(path);
  model<Net> m;
  std::unordered_set<std::string> known{"architecture.json"};
  if (const data::npz_entry* a = archive.find("architecture.json")) {
    const std::string json = where + ": architecture.json";
    if (a->size > model_architecture_max_bytes)
      fail(json, "size",
           "at most " + std::to_string(model_architecture_max_bytes) +
               " bytes (a network's architecture takes a few kilobytes)",
           std::to_string(a->size) + " bytes");
    const std::vector<unsigned char> bytes = archive.read(*a);
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const detail::json_leaves found(text, json);
    // The preprocessing is read first, so that the architecture is compared whole: version,
    // input, the steps as the file lists them, and the layers.
    data::preprocessing pre =
        detail::read_preprocessing(found, archive, Net::input_width, where, known);
    detail::check_architecture(model_architecture<Net>(pre), found, json);
    pre.check(Net::input_width, Net::sparse_input, json);
    m.set_preprocessing(std::move(pre));
  }
  const std::span<float> p = m.parameters();
  detail::for_each_model_layer<Net>([&]<class Stack, std::size_t I>(
                                        [[maybe_unused]] std::string_view module,
                                        [[maybe_unused]] index_t offset) {
    using L = typename Stack::template layer<I>;
    if constexpr (L::param_count > 0) {  // max-pooling has no members
      float* w = p.data() + offset + Stack::template param_offset<I>();
      const auto read = [&](std::string_view what, std::vector<std::size_t> shape) {
        const std::string name = detail::layer_member(module, I, what);
        known.insert(name);
        const data::npz_entry* found = archive.find(name);
        if (!found)
          fail(where, name,
               "a member holding layer " + std::to_string(I) + " of " + std::string(module) +
                   " (float32 " + detail::tuple_text(shape) + ")",
               "none; the file has " + detail::member_list(archive.entries()));
        data::host_array<float> a =
            data::parse_npy<float>(archive.read(*found), where + ": " + name);
        if (a.shape != shape)
          fail(where + ": " + name, "shape", detail::tuple_text(shape),
               detail::tuple_text(a.shape));
        const auto bad = std::find_if(a.values.begin(), a.values.end(),
                                      [](float v) { return !std::isfinite(v); });
        if (bad != a.values.end())
          fail(where + ": " + name, "values", "finite numbers",
               std::to_string(*bad) + " at flat index " + std::to_string(bad - a.values.begin()));
        return std::move(a.values);
      };
      const std::vector<float> weight = read("weight", detail::weight_shape<L>());
      const std::vector<float> bias = read("bias", {std::size_t(L::bias_count)});
      for (index_t o = 0; o < L::weight_rows; ++o)
        for (index_t j = 0; j < L::weight_cols; ++j)
          w[detail::stored_weight_index<Stack, I>(o, j)] =
              weight[std::size_t(o * L::weight_cols + j)];
      std::copy(bias.begin(), bias.end(), w + L::weight_count);
    }
  });
  for (const data::npz_entry& e : archive.entries()) {
    const bool layer_like = e.name.starts_with("features.") || e.name.starts_with("classifier.") ||
                            e.name.starts_with("discriminator.");
    const bool unknown = !known.contains(e.name);
    if (layer_like && unknown)
      fail(where, detail::shown(e.name),
           "no member beyond the network's layers (a different depth?)", "this one");
    // Statistics no step reads would be preprocessing silently skipped.
    if (e.name.starts_with("preprocess.") && unknown)
      fail(where, detail::shown(e.name), "a preprocessing member that architecture.json lists",
           "this one");
  }
  return m;
}

//! Reads the model file at `path` into `step`'s parameters (converted to its value type), for
//! evaluation or fine-tuning; its optimizer state and step index stay as they were. On failure
//! the step is unchanged.
template <class Step>
requires requires {
  typename Step::net_type;
}
void load_model(const std::filesystem::path& path, Step& step) {
  const model<typename Step::net_type> m = load_model<typename Step::net_type>(path);
  const std::span<const float> from = m.parameters();
  const auto to = step.parameters();
  using T = typename decltype(to)::value_type;
  std::transform(from.begin(), from.end(), to.begin(), [](float v) { return T(v); });
}

}  // namespace dafuse
