// SPDX-License-Identifier: Apache-2.0
#include "network.hpp"

#include "config.hpp"
#include "run_text.hpp"

#include <dafuse/core/file.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string_view>
#include <vector>

namespace dafuse_train {
namespace {

// Widths above this are refused: a layer of 10⁶ × 10⁶ would not fit in memory anyway, and the
// bound keeps every product of widths far from index_t's range.
constexpr long max_width = 1'000'000;
// Layers a module may have: each is a type the compiler instantiates (a 10 000-layer network took
// 38 s and 1 GB to fail); no network of the papers dafuse follows has more than a handful.
constexpr std::size_t max_layers = 64;

// A finite float in the fewest digits that read back the same (run_text's number), as a C++ float
// literal.
std::string float_literal(float v) {
  std::string s = number(v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

std::string activation_text(const module_text& m) {
  if (m.activation == "leaky_relu")
    return "df::nn::leaky_relu_t{" + float_literal(m.negative_slope) + "}";
  return "df::nn::" + m.activation;
}

// nn::linear for one layer, else nn::mlp with the widths and the activation.
std::string module_type(const module_text& m, bool features) {
  if (m.widths.size() == 2 && !features) return "df::nn::linear<" + joined(m.widths, ", ") + ">";
  return "df::nn::mlp<" + joined(m.widths, ", ") + ", " + activation_text(m) + ">";
}

std::string trimmed(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return "";
  return std::string(s.substr(first, s.find_last_not_of(" \t\r") - first + 1));
}

void check_choice(const std::string& option,
                  const std::string& value,
                  std::initializer_list<const char*> choices) {
  std::string list;
  for (const char* c : choices) {
    if (value == c) return;
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  throw usage_error(option + ": expected one of " + list + ", found '" + value + "'");
}

}  // namespace

std::string joined(const std::vector<long>& widths, const char* separator) {
  std::string s;
  for (std::size_t i = 0; i < widths.size(); ++i)
    s += (i ? separator : "") + std::to_string(widths[i]);
  return s;
}

module_text parse_module(const std::string& option, const std::string& text) {
  module_text m;
  m.given = true;
  const std::size_t colon = text.find(':');
  const std::string widths = text.substr(0, colon);
  if (colon != std::string::npos) {
    std::string act = text.substr(colon + 1);
    if (act.rfind("leaky_relu=", 0) == 0) {
      const std::string slope = act.substr(11);
      char* end = nullptr;
      m.negative_slope = std::strtof(slope.c_str(), &end);
      if (slope.empty() || *end != '\0' || !std::isfinite(m.negative_slope) ||
          !(m.negative_slope > 0))
        throw usage_error(option +
                          ": expected leaky_relu=SLOPE with a finite SLOPE > 0 (its "
                          "derivative is read from the output's sign), found '" +
                          act + "'");
      act = "leaky_relu";
    }
    check_choice(option + " activation", act,
                 {"identity", "relu", "leaky_relu", "sigmoid", "tanh"});
    m.activation = act;
    m.activation_given = true;
  }
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = widths.find(',', at);
    const std::string w = widths.substr(at, comma - at);
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(w.c_str(), &end, 10);
    if (w.empty() || *end != '\0' || errno == ERANGE || v < 1 || v > max_width)
      throw usage_error(option + ": expected widths W0,W1,... (integers in [1, " +
                        std::to_string(max_width) + "]) and an optional :ACTIVATION, found '" +
                        text + "'");
    m.widths.push_back(v);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (m.widths.size() < 2)
    throw usage_error(option + ": expected at least two widths (input, output), found '" + text +
                      "'");
  if (m.widths.size() > max_layers + 1)
    throw usage_error(option + ": expected at most " + std::to_string(max_layers) + " layers (" +
                      std::to_string(max_layers + 1) + " widths), found " +
                      std::to_string(m.widths.size() - 1));
  return m;
}

void read_network_file(const std::string& path, network_text& n) {
  // A regular file of at most 64 KiB (a description is a few lines), read through core/file.hpp:
  // a FIFO, /dev/zero or a folder is refused at once, by name, never waited on or read forever.
  constexpr std::uint64_t largest = 64 * 1024;
  std::string text;
  try {
    const dafuse::detail::input_file file(path, "--network " + path);
    if (file.size() > largest)
      throw usage_error("--network " + path + ": expected a description of at most " +
                        std::to_string(largest) + " bytes, found " + std::to_string(file.size()));
    const std::vector<unsigned char> bytes = file.read_all("the network description");
    text.assign(bytes.begin(), bytes.end());
  } catch (const dafuse::error& e) {
    throw usage_error(e.what());
  }
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trimmed(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const std::size_t eq = line.find('=');
    const std::string where = path + ":" + std::to_string(number);
    if (eq == std::string::npos)
      throw usage_error(where + ": expected 'key = value', found '" + line + "'");
    const std::string key = trimmed(line.substr(0, eq)), value = trimmed(line.substr(eq + 1));
    if (key == "features") {
      n.features = parse_module(where + ": features", value);
    } else if (key == "classifier") {
      n.classifier = parse_module(where + ": classifier", value);
    } else if (key == "discriminator") {
      n.discriminator = parse_module(where + ": discriminator", value);
    } else if (key == "sparse") {
      check_choice(where + ": sparse", value, {"true", "false"});
      n.sparse = value == "true";
    } else if (key == "precision") {
      n.precision = value;
    } else if (key == "clip") {
      n.clip = value;
    } else if (key == "head") {
      n.head = value;
    } else if (key == "optim") {
      n.optim = value;
    } else if (key == "schedule") {
      n.schedule = value;
    } else {
      throw usage_error(where +
                        ": expected a key features, classifier, discriminator, sparse, "
                        "precision, clip, head, optim or schedule, found '" +
                        key + "'");
    }
  }
}

void complete_network(network_text& n) {
  if (!n.features.given) throw usage_error("--features: expected G_f's widths, e.g. 256,128:relu");
  if (!n.classifier.given)
    throw usage_error(
        "--classifier: expected G_y's widths, e.g. 128,10 (the last is the class "
        "count)");
  check_choice("--precision", n.precision, {"fp32", "bf16", "fp16"});
  check_choice("--clip", n.clip, {"none", "global_norm"});
  check_choice("--head", n.head,
               {"dann", "source_only", "cdan", "cdan_e", "coral", "mmd", "mmd_linear", "mcc",
                "cdan_e+mcc", "mdd"});
  check_choice("--optim", n.optim, {"sgd", "adam", "adamw"});
  check_choice("--schedule", n.schedule, {"ganin", "tllib", "constant"});
  const long features = n.features.widths.back();
  const long classes = n.classifier.widths.back();
  if (n.classifier.widths.front() != features)
    throw usage_error("--classifier: expected the input width " + std::to_string(features) +
                      " (G_f's output), found " + std::to_string(n.classifier.widths.front()));
  if (classes < 2)
    throw usage_error("--classifier: expected at least 2 classes (its last width), found " +
                      std::to_string(classes));
  const bool joint = n.head == "cdan" || n.head == "cdan_e" || n.head == "cdan_e+mcc";
  // CDAN's discriminator reads softmax(G_y) ⊗ h: features × classes values a row.
  const long d_in = joint ? features * classes : features;
  // MDD's G_d is the adversarial classifier f': one logit a class.
  const bool margin = n.head == "mdd";
  const long d_out = margin ? classes : 1;
  if (!n.discriminator.given) {
    n.discriminator.widths = {d_in, d_out};
    n.discriminator.given = true;
  }
  if (n.discriminator.widths.front() != d_in)
    throw usage_error("--discriminator: expected the input width " + std::to_string(d_in) +
                      (joint ? " (G_f's output × the classes: " + n.head + " reads g ⊗ h)"
                             : std::string(" (G_f's output)")) +
                      ", found " + std::to_string(n.discriminator.widths.front()));
  if (n.discriminator.widths.back() != d_out)
    throw usage_error("--discriminator: expected " +
                      (margin ? std::to_string(d_out) +
                                    " outputs (mdd's G_d is the adversarial classifier: "
                                    "one logit a class)"
                              : std::string("one output (the domain logit)")) +
                      ", found " + std::to_string(n.discriminator.widths.back()));
  // The parameters, their gradients and momentum (3 × 4 bytes each) must fit this machine's memory
  // before minutes of compiling are spent on a network that cannot train.
  double parameters = 0;
  for (const auto* m : {&n.features, &n.classifier, &n.discriminator})
    for (std::size_t i = 0; i + 1 < m->widths.size(); ++i)
      parameters += double(m->widths[i]) * double(m->widths[i + 1]) + double(m->widths[i + 1]);
  const double memory = double(dafuse::detail::physical_memory_bytes());
  if (12 * parameters > memory)
    throw usage_error("--features, --classifier, --discriminator: expected a network whose " +
                      std::to_string(std::uint64_t(parameters)) +
                      " parameters (with their gradients and momentum, 12 bytes each) fit this "
                      "machine's memory (" +
                      std::to_string(std::uint64_t(memory)) + " bytes); make the widths smaller");
  for (const auto* m : {&n.classifier, &n.discriminator})
    if (m->widths.size() == 2 && m->activation_given)
      throw usage_error(std::string(m == &n.classifier ? "--classifier" : "--discriminator") +
                        ": a single layer has no hidden layer to activate (its output are "
                        "logits), found the activation " +
                        m->activation);
}

std::string step_type_text(const network_text& n) {
  std::string features = module_type(n.features, true);
  if (n.sparse) features = "df::nn::sparse_input<" + features + ">";
  const std::string net = "df::nn::dann_net<" + features + ", " + module_type(n.classifier, false) +
                          ", " + module_type(n.discriminator, false) + ">";
  const std::string precision = n.precision == "fp16"
                                    ? "df::precision::fp16<df::loss_scale::dynamic>"
                                    : "df::precision::" + n.precision;
  // Every head with the one schedule; "a+b" is head::combine of the two.
  const auto head = [&](const std::string& name) {
    return "df::head::" + name + "<df::schedule::" + n.schedule + ">";
  };
  const std::size_t plus = n.head.find('+');
  const std::string head_type = plus == std::string::npos
                                    ? head(n.head)
                                    : "df::head::combine<" + head(n.head.substr(0, plus)) + ", " +
                                          head(n.head.substr(plus + 1)) + ">";
  return "df::train_step<" + net + ", " + (n.sparse ? "df::loader::sync" : "df::loader::resident") +
         ", " + precision + ", df::clip::" + n.clip + ", " + head_type + ", df::optim::" + n.optim +
         ">";
}

std::string network_description(const network_text& n) {
  const auto module = [](const module_text& m, bool features) {
    return joined(m.widths, "-") +
           (m.widths.size() > 2 || features
                ? " " + (m.activation == "leaky_relu"
                             ? "leaky_relu(" + number(m.negative_slope) + ")"
                             : m.activation)
                : std::string());
  };
  return (n.sparse ? "CSR " : "") + module(n.features, true) + ", " +
         std::to_string(n.classifier.widths.back()) + " classes (" + module(n.classifier, false) +
         "), " + module(n.discriminator, false) + " discriminator; " + n.precision + ", " + n.clip +
         " clip, " + n.head + (n.optim == "sgd" ? "" : ", " + n.optim) +
         (n.schedule == "ganin" ? "" : ", " + n.schedule + " schedule");
}

}  // namespace dafuse_train
