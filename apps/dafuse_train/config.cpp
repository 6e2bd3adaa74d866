// SPDX-License-Identifier: Apache-2.0
#include "config.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <string_view>
#include <utility>

namespace dafuse_train {
namespace {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = text.find(',', at);
    parts.push_back(text.substr(at, comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return parts;
}

long to_long(std::string_view option, const std::string& text, long least) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < least)
    throw usage_error(std::string(option) + ": expected an integer >= " + std::to_string(least) +
                      ", found '" + text + "'");
  return v;
}

//! Which numbers an option takes besides finite ones.
enum class sign { any, non_negative, positive };

double to_double(std::string_view option, const std::string& text, sign s = sign::any) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const bool in_range = s == sign::any || (s == sign::non_negative ? v >= 0 : v > 0);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || !in_range)
    throw usage_error(std::string(option) + ": expected a finite number" +
                      (s == sign::positive       ? " > 0"
                       : s == sign::non_negative ? " >= 0"
                                                 : "") +
                      ", found '" + text + "'");
  return v;
}

dafuse::select::validator to_validator(std::string_view option, const std::string& text) {
  try {
    return dafuse::select::parse_validator(text, option);
  } catch (const dafuse::error& e) {
    throw usage_error(e.what());
  }
}

//! One --sweep KEY=V1,V2,... into `s`: KEY lambda_max (>= 0), lr (> 0) or seeds (integers >= 0);
//! each value once, each key once.
void parse_sweep(const std::string& text, sweep_text& s) {
  const std::size_t equals = text.find('=');
  const std::string key = text.substr(0, equals);
  if (equals == std::string::npos || (key != "lambda_max" && key != "lr" && key != "seeds"))
    throw usage_error(
        "--sweep: expected KEY=V1,V2,... with KEY lambda_max, lr or seeds (e.g. --sweep "
        "lr=0.01,0.03), found '" +
        text + "'");
  const std::string option = "--sweep " + key;
  const std::string values = text.substr(equals + 1);
  if (values.empty())
    throw usage_error(option + ": expected a comma-separated list of values, found none");
  const bool given = key == "lambda_max" ? !s.lambda_max.empty()
                     : key == "lr"       ? !s.lr.empty()
                                         : !s.seeds.empty();
  if (given) throw usage_error(option + ": expected once, found a second list '" + values + "'");
  for (const std::string& v : split_commas(values)) {
    if (v.empty())
      throw usage_error(option + ": expected a comma-separated list of values, found an empty " +
                        "value in '" + values + "'");
    if (key == "seeds") {
      const auto seed = std::uint64_t(to_long(option, v, 0));
      if (std::find(s.seeds.begin(), s.seeds.end(), seed) != s.seeds.end())
        throw usage_error(option + ": expected distinct values, found " + v + " twice");
      s.seeds.push_back(seed);
      continue;
    }
    std::vector<double>& list = key == "lr" ? s.lr : s.lambda_max;
    const double x = to_double(option, v, key == "lr" ? sign::positive : sign::non_negative);
    // Compared as the float the training reads: 0.1 and 0.10000000001 are one value.
    for (const double y : list)
      if (float(y) == float(x))
        throw usage_error(option + ": expected distinct values, found " + v + " twice");
    list.push_back(x);
  }
  s.given = true;
}

}  // namespace

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    // Flags without a value.
    if (arg == "--help" || arg == "-h") {
      c.help = true;
      continue;
    }
    if (arg == "--version") {
      c.version = true;
      continue;
    }
    if (arg == "--list") {
      c.list = true;
      continue;
    }
    if (arg == "--profile") {
      c.profile = true;
      continue;
    }
    if (arg == "--restore-best") {
      c.restore_best = true;
      continue;
    }
    if (arg == "--quiet") {
      c.quiet = true;
      continue;
    }
    if (arg == "--sparse") {
      c.network.sparse = true;
      c.network_policies_given = true;
      continue;
    }
    if (arg.substr(0, 2) != "--")
      throw usage_error("unexpected argument '" + std::string(arg) +
                        "' (options start with --; see --help)");
    if (i + 1 >= argc) throw usage_error(std::string(arg) + ": expected a value after it");
    const std::string value = argv[++i];
    if (arg == "--model")
      c.model = value;
    else if (arg == "--features")
      c.network.features = parse_module("--features", value);
    else if (arg == "--classifier")
      c.network.classifier = parse_module("--classifier", value);
    else if (arg == "--discriminator")
      c.network.discriminator = parse_module("--discriminator", value);
    else if (arg == "--network") {
      read_network_file(value, c.network);  // later words win, the file's or the options'
      c.network_policies_given = true;
    } else if (arg == "--precision" || arg == "--clip" || arg == "--head" || arg == "--optim" ||
               arg == "--schedule") {
      (arg == "--precision" ? c.network.precision
       : arg == "--clip"    ? c.network.clip
       : arg == "--head"    ? c.network.head
       : arg == "--optim"   ? c.network.optim
                            : c.network.schedule) = value;
      c.network_policies_given = true;
    } else if (arg == "--source")
      c.source = value;
    else if (arg == "--source-labels")
      c.source_labels = value;
    else if (arg == "--target")
      c.target = value;
    else if (arg == "--target-labels")
      c.target_labels = value;
    else if (arg == "--target-test")
      c.target_test = value;
    else if (arg == "--target-test-labels")
      c.target_test_labels = value;
    else if (arg == "--preprocess")
      c.preprocess = split_commas(value);
    else if (arg == "--steps")
      c.steps = to_long(arg, value, 1);
    else if (arg == "--batch")
      c.batch = to_long(arg, value, 1);
    else if (arg == "--lr")
      c.lr = to_double(arg, value, sign::positive);
    else if (arg == "--momentum")
      c.momentum = to_double(arg, value, sign::non_negative);
    else if (arg == "--lambda-max")
      c.lambda_max = to_double(arg, value, sign::non_negative);
    else if (arg == "--weight-decay")
      c.weight_decay = to_double(arg, value, sign::non_negative);
    else if (arg == "--max-grad-norm")
      c.max_grad_norm = to_double(arg, value, sign::positive);
    else if (arg == "--seed")
      c.seed = std::uint64_t(to_long(arg, value, 0));
    else if (arg == "--eval-every")
      c.eval_every = to_long(arg, value, 0);
    else if (arg == "--validation-fraction")
      c.validation_fraction = to_double(arg, value);
    else if (arg == "--validator") {
      c.reverse_validation = value == "reverse";
      if (!c.reverse_validation) c.selector = to_validator(arg, value);
      c.selector_given = true;
    } else if (arg == "--validators") {
      c.validators.clear();
      for (const std::string& v : split_commas(value)) c.validators.push_back(to_validator(arg, v));
    } else if (arg == "--validator-rows")
      c.validator_rows = to_long(arg, value, 2);
    else if (arg == "--patience")
      c.patience = to_long(arg, value, 0);
    else if (arg == "--checkpoint")
      c.checkpoint = value;
    else if (arg == "--checkpoint-every")
      c.checkpoint_every = to_long(arg, value, 0);
    else if (arg == "--best")
      c.best_checkpoint = value;
    else if (arg == "--resume")
      c.resume = value;
    else if (arg == "--trace")
      c.trace = value;
    else if (arg == "--json")
      c.json = value;
    else if (arg == "--curves")
      c.curves = value;
    else if (arg == "--save-model")
      c.save_model = value;
    else if (arg == "--predictions")
      c.predictions = value;
    else if (arg == "--curve-every")
      c.curve_every = to_long(arg, value, 1);
    else if (arg == "--threads")
      c.threads = to_long(arg, value, 1);
    else if (arg == "--stop-after")
      c.stop_after = to_long(arg, value, 1);
    else if (arg == "--sweep")
      parse_sweep(value, c.sweep);
    else if (arg == "--sweep-parallel")
      c.sweep.parallel = to_long(arg, value, 1);
    else
      throw usage_error("unknown option '" + std::string(arg) + "' (see --help)");
  }
  if (c.help || c.list || c.version) return c;
  if (c.network.given()) {
    if (!c.model.empty())
      throw usage_error(
          "--model: expected either a registry model or a network (--features, "
          "--network), found both");
    complete_network(c.network);
  } else if (c.network_policies_given) {
    throw usage_error(
        "--sparse, --precision, --clip, --head, --optim and --schedule: expected with a network of "
        "your own (--features ...); a registry model has its policies (--list)");
  } else if (c.model.empty()) {
    throw usage_error("--model: expected a model name (see --list), or a network (--features)");
  }
  if (c.source.empty()) throw usage_error("--source: expected the source features");
  if (c.target.empty()) throw usage_error("--target: expected the target features");
  if (!(c.validation_fraction >= 0 && c.validation_fraction < 1))
    throw usage_error("--validation-fraction: expected a fraction in [0, 1), found " +
                      std::to_string(c.validation_fraction));
  if (!c.target_test_labels.empty() && c.target_test.empty())
    throw usage_error("--target-test-labels: expected --target-test (the test features) too");
  if (c.sweep.parallel > 0 && !c.sweep.given)
    throw usage_error("--sweep-parallel: expected with --sweep (a grid of trainings)");
  // Reverse validation trains a model per candidate: one per configuration of a grid is what
  // it costs (a second training), one per evaluation of a run would be many.
  if (c.reverse_validation && !c.sweep.given)
    throw usage_error(
        "--validator reverse: expected with --sweep (reverse validation trains a reverse model "
        "for each candidate: it chooses among a grid's configurations, not among one run's "
        "evaluations)");
  // EnsV scores a set of trainings against their ensemble once all have finished: a grid's
  // trainings are such a set, one run's evaluations (scored one at a time as it goes) are not.
  if (!c.sweep.given) {
    const char* why =
        " (ensv scores each training of a grid by its agreement with the ensemble of all of "
        "them, once every one has finished: it chooses among a grid's configurations, not among "
        "one run's evaluations)";
    if (!c.reverse_validation && dafuse::select::scores_a_set(c.selector))
      throw usage_error("--validator " + std::string(dafuse::select::name(c.selector)) +
                        ": expected with --sweep" + why);
    for (const dafuse::select::validator v : c.validators)
      if (dafuse::select::scores_a_set(v))
        throw usage_error("--validators " + std::string(dafuse::select::name(v)) +
                          ": expected with --sweep" + why);
  }
  if (c.sweep.given) {
    if (!c.selector_given)
      throw usage_error(
          "--validator: expected with --sweep (the label-free validator that chooses the "
          "configuration: source_accuracy, entropy, im, snd, dev, pad, bnm, mano, ensv or "
          "reverse)");
    // Options of one training that a grid of them cannot share or does not have.
    const std::pair<bool, const char*> single[] = {{!c.checkpoint.empty(), "--checkpoint"},
                                                   {!c.best_checkpoint.empty(), "--best"},
                                                   {!c.resume.empty(), "--resume"},
                                                   {c.stop_after > 0, "--stop-after"},
                                                   {!c.save_model.empty(), "--save-model"},
                                                   {!c.predictions.empty(), "--predictions"},
                                                   {!c.curves.empty(), "--curves"},
                                                   {!c.trace.empty(), "--trace"},
                                                   {c.profile, "--profile"},
                                                   {c.restore_best, "--restore-best"},
                                                   {c.patience > 0, "--patience"},
                                                   {c.eval_every > 0, "--eval-every"}};
    for (const auto& [given, option] : single)
      if (given)
        throw usage_error(std::string(option) +
                          ": not with --sweep (each training of the grid scores the model it "
                          "ends with); train the chosen configuration on its own for it");
  }
  // Two outputs to one path: the later write would replace the earlier one (a model file
  // overwritten by the predictions), so refuse before training. Paths compare as written,
  // normalised (a/./b is a/b); links and hard links are not followed.
  const std::pair<const std::string*, const char*> outputs[] = {{&c.checkpoint, "--checkpoint"},
                                                                {&c.best_checkpoint, "--best"},
                                                                {&c.json, "--json"},
                                                                {&c.curves, "--curves"},
                                                                {&c.trace, "--trace"},
                                                                {&c.save_model, "--save-model"},
                                                                {&c.predictions, "--predictions"}};
  for (std::size_t i = 0; i < std::size(outputs); ++i)
    for (std::size_t j = i + 1; j < std::size(outputs); ++j) {
      const std::string &a = *outputs[i].first, &b = *outputs[j].first;
      if (!a.empty() && !b.empty() &&
          std::filesystem::path(a).lexically_normal() ==
              std::filesystem::path(b).lexically_normal())
        throw usage_error(std::string(outputs[i].second) + " and " + outputs[j].second +
                          ": expected different files, found both '" + a + "'");
    }
  // Without held-out source rows the default selector (source accuracy) has nothing to read:
  // select by the target's prediction entropy, which needs no labels.
  if (c.validation_fraction == 0 && !c.selector_given)
    c.selector = dafuse::select::validator::entropy;
  return c;
}

std::string usage() {
  return R"(usage: dafuse-train --model NAME --source X --source-labels Y --target X [options]
       dafuse-train --features 256,128 --classifier 128,10 --source X ... [options]

Trains one DANN-style set-up from the registry (--list) on NPY data, with evaluation,
label-free model selection, checkpoints and profiling, and reports what happened.

Data
  --source X            source features: an NPY file [N, ...] (float32; float64 and integers
                        converted on load, one line says so; uint8 images scaled by 1/255),
                        or a CSR prefix P with P_indptr.npy, P_indices.npy, P_data.npy
  --source-labels Y     integer NPY [N] (int64 as np.save writes it, or any integer type
                        whose values fit int32; default for a CSR prefix: P_labels.npy)
  --target X            target features, as --source
  --target-labels Y     optional; only reported (oracle accuracy), never used to train or select
  --target-test X       a target test set, as --target, never trained on: the selected model
                        (what --save-model and --predictions write) and the last step's are
                        scored on it, each labelled
  --target-test-labels Y  its integer labels (default for a CSR prefix: P_labels.npy)
  --preprocess A[,B]    transforms in order: none, standardize, l2, log1p, binarize
                        (dense: standardize is fitted on the source; CSR: l2, log1p, binarize)

A network of any width instead of --model (compiled once, then cached; docs/cli.md)
  --features W0,W1,...[:ACT]  G_f: input width first; ACT after every layer (default relu):
                        identity, relu, leaky_relu, leaky_relu=SLOPE, sigmoid, tanh
  --classifier W0,...,C[:ACT]  G_y: W0 = G_f's output, C classes; ACT after hidden layers
  --discriminator W0,...,1[:ACT]  G_d (default: one linear layer from G_f's output; with
                        --head mdd it ends in C outputs: the adversarial classifier f')
  --sparse              G_f reads CSR rows
  --precision P         fp32 (default), bf16, fp16 (dynamic loss scale)
  --clip C              none (default), global_norm (--max-grad-norm)
  --head H              dann (default), source_only, cdan, cdan_e, coral, mmd, mmd_linear, mcc,
                        cdan_e+mcc (CDAN+E plus MCC, each weighted by --lambda-max), mdd
                        --lambda-max to start with (docs/start_here.md): dann, cdan, cdan_e,
                        mmd, mcc, mdd 1 (0.03-0.1 on sparse text); coral 300-10000 (its loss
                        is divided by 4 x width^2: at 1 it does nothing)
  --optim O             sgd (default; --momentum), adam, adamw (betas 0.9, 0.999)
  --schedule S          ganin (default: lambda ramps from 0, lr anneals), tllib, constant
  --network FILE        the same as lines "features = 256,128:relu" ('#' comments)

Training (absent: the model's defaults, shown by --list; lr > 0, momentum, lambda >= 0)
  --steps N  --batch B  --lr X  --momentum X  --lambda-max X  --max-grad-norm X  --seed S
  --weight-decay X      L2 penalty (sgd, adam) or decoupled decay (adamw); default 0
  --threads N           OpenMP threads

Evaluation and selection
  --eval-every K        evaluate every K steps and after the last (0: only at the end)
  --validation-fraction F  source rows held out for validation, not trained on (default 0.1;
                        0: none, and the default validator becomes entropy)
  --validator V         selects the best model: source_accuracy (default), entropy, im, snd,
                        dev, pad, bnm, mano (none reads target labels). With one evaluation (the
                        default --eval-every) the selected model is the last step's.
                        source_accuracy sees held-out source labels only, not the target: on
                        digits-dann, 5 seeds x 12 evaluations, its choice scored 42.8 % on USPS
                        and 50.7 % on MNIST, the last step 45.0 % and 53.9 %
                        (docs/validators.md, "Choosing a checkpoint"). With --sweep also reverse
                        (reverse validation): each final model's target predictions train the
                        same network at lambda 0 (a second training per run), scored on the
                        source labels; choosing among DANN, CORAL and MCC on the 12 Amazon tasks
                        its choices averaged 77.01 % to IM's 73.95 % (docs/heads.md, "Per-task
                        label-free choice"). With --sweep also ensv (ensemble validation, Hu et
                        al. 2024): every training keeps its target predictions (4 x classes x
                        --validator-rows bytes) and, once all have finished, scores its agreement
                        with their ensemble's classes (docs/validators.md)
  --validators A,B      also compute these at each evaluation (ensv: with --sweep)
  --validator-rows N    target rows the validators read at most (default 2000)
  --patience P          stop after P evaluations without improvement
  --restore-best        end with the selected model's weights

Label-free selection of hyperparameters (docs/cli.md, "Sweeps")
  --sweep KEY=V1,V2,... a grid instead of one training, KEY one of lambda_max (>= 0), lr (> 0),
                        seeds (integers), each --sweep once (e.g. --sweep lambda_max=0.1,1
                        --sweep lr=0.01,0.03 --sweep seeds=1,2,3); a key not swept takes
                        --lambda-max, --lr or --seed. Every (lambda_max, lr) trains once per
                        seed; --validator (required) scores each final model, the best mean
                        over the seeds is chosen; with target labels the oracle choice (by
                        target accuracy) is reported apart, labelled as such
  --sweep-parallel P    trainings at once at most (default: the processors this process may
                        use divided by --threads, which is 1 per training by default)

Checkpoints
  --checkpoint FILE     save here every --checkpoint-every steps and at the end
  --checkpoint-every K
  --best FILE           save the best model here whenever it improves
  --resume FILE         continue a run from its checkpoint (same model, data and options)
  --stop-after N        end after step N as if interrupted (the checkpoint is saved there):
                        train in chunks, e.g. under a time limit, and --resume later; SIGTERM,
                        SIGINT or SIGHUP ends the training so after its step (exit 128 +
                        signal; a second signal exits at once)

Output
  --profile             print the per-phase time table
  --trace FILE          write a Chrome trace (open in ui.perfetto.dev or chrome://tracing)
  --json FILE           write the configuration and every result as JSON
  --curves PREFIX       write PREFIX.csv and PREFIX.svg (losses, accuracies, lambda, validators)
  --curve-every N       steps per curve point (default: about 500 points)
  --save-model FILE     write the selected model as a model file (.npz: weights by module and
                        layer, torch.nn.Linear layout, architecture.json, and what --preprocess
                        fitted, so the model reads raw rows; docs/training.md)
  --predictions FILE    write the selected model's class of each target test row (--target-test)
                        or, without a test set, of each target row (int32 NPY)
  --quiet               no progress bar or lines
  --list                list the models
  --version             the version, and the CPU instructions the kernels run on
  --help                this text
)";
}

}  // namespace dafuse_train
