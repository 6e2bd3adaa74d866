// Adaptation heads on the 12 Amazon reviews tasks (Ganin et al., JMLR 2016, section 5.1; data in
// ../shared/data/amazon_reviews, see its README): train on <source>_train (2000 labelled
// reviews) and <target>_train (2000, labels never read), report accuracy on every row of
// <target>_test. The example's network for every head (examples/02_amazon_reviews.cpp): raw
// counts, G_f sparse 5000 → 100 ReLU, G_y 100 → 2, G_d 100 → 1 (200 → 1 for CDAN, which reads
// softmax(g) ⊗ h), B = 64 + 64, SGD lr 0.01 momentum 0.9, Ganin's schedules, PyTorch's default
// initialisation, fp32.
//
// Each head's λ_max is chosen once, on one task (--select, dvd->books by default), by a
// label-free validator (--validator, dev by default: deep embedded validation, which holds 10 %
// of S_train out of the selection's trainings) over a grid (train/sweep.hpp), and then fixed for
// all 12 tasks, whose trainings use all of S_train; the oracle choice on that task (by its test
// accuracy) is printed beside it, labelled, and never used. --lambda HEAD=V,... fixes λ_max
// instead (no selection for that head).
// Trainings run in parallel (one thread each, as many at once as the processors allow).
//
// --per-task CANDIDATES (e.g. "dann=0.1,coral=300/3000,mcc=0.03/0.1/0.3/1") chooses instead, on
// each task, one of the candidates (a head at one λ_max; the list is fixed for the family) by a
// label-free validator of that task's unlabelled T_train predictions, the mean over the seeds
// as dafuse::sweep does: every candidate is trained with every seed on all of S_train, scored
// by entropy, IM and SND, and each validator's choice is reported with its T_test accuracy (mean
// ± std over the seeds), beside the oracle's (the best T_test accuracy: it reads target labels
// and is labelled so). --reverse 1 adds reverse validation (train/reverse_validation.hpp: a
// source-only model trained on T_train labelled by the model's predictions, scored on S_train's
// labels; a second training per run). --runs FILE writes one JSON line per training.
//
//   build/bench/heads_amazon [--seeds 5] [--steps 2000] [--data DIR] [--heads LIST]
//       [--tasks LIST] [--select dvd->books] [--validator dev] [--selection-seeds 3]
//       [--lambda dann=0.1,...] [--threads-per-run 1]
//       [--per-task CANDIDATES [--reverse 1] [--runs FILE]]
#include <dafuse/dafuse.hpp>
#include <dafuse/train/reverse_validation.hpp>
#include <dafuse/train/sweep.hpp>

#include "../examples/common.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace df = dafuse;

namespace {

constexpr df::index_t vocabulary = 5000;
template <df::index_t DiscriminatorInput>
using amazon_net =
    df::nn::dann_net<df::nn::sparse_input<df::nn::mlp<vocabulary, 100, df::nn::relu>>,
                     df::nn::linear<100, 2>,
                     df::nn::linear<DiscriminatorInput, 1>>;
template <class Head, df::index_t DiscriminatorInput = 100>
using amazon_step = df::train_step<amazon_net<DiscriminatorInput>,
                                   df::loader::sync,
                                   df::precision::fp32,
                                   df::clip::none,
                                   Head,
                                   df::optim::sgd>;
using ganin = df::schedule::ganin;

const char* const domains[] = {"books", "dvd", "electronics", "kitchen"};

struct task {
  std::string source, target;
  std::string name() const { return source + "->" + target; }
};

std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t next = text.find(by, at);
    out.push_back(text.substr(at, next - at));
    if (next == std::string::npos) return out;
    at = next + 1;
  }
}

task parse_task(const std::string& text) {
  const std::size_t arrow = text.find("->");
  task t{text.substr(0, arrow), arrow == std::string::npos ? "" : text.substr(arrow + 2)};
  const auto known = [](const std::string& d) {
    for (const char* x : domains)
      if (d == x) return true;
    return false;
  };
  if (!known(t.source) || !known(t.target) || t.source == t.target)
    throw std::runtime_error(
        "a task: expected SOURCE->TARGET of books, dvd, electronics, "
        "kitchen, found '" +
        text + "'");
  return t;
}

struct bench_data {
  df::data::sparse_dataset source, target, test;
};

bench_data load(const std::filesystem::path& dir, const task& t) {
  const auto one = [&](const std::string& domain, const std::string& part, df::data::domain side) {
    const std::filesystem::path prefix = dir / (domain + "_" + part);
    return df::data::load_sparse_dataset(prefix, dir / (domain + "_" + part + "_labels.npy"), side,
                                         vocabulary);
  };
  return {one(t.source, "train", df::data::domain::source),
          one(t.target, "train", df::data::domain::target),
          one(t.target, "test", df::data::domain::target)};
}

struct settings {
  long steps = 2000, seeds = 5, selection_seeds = 3;
  int threads_per_run = 1;
  df::select::validator validator = df::select::validator::dev;
};

df::fit_args base_args(const settings& s) {
  return {.steps = s.steps,
          .batch = 64,
          .lr = 0.01f,
          .momentum = 0.9f,
          .lambda_max = 0.1f,
          .seed = 1,
          .init = df::nn::weight_init::torch_default};
}

df::sweep_options sweep_options(const settings& s) {
  df::sweep_options o;
  o.selector = s.validator;
  // source_accuracy and dev read held-out source rows: 10 % then stays out of training.
  const bool held_out = s.validator == df::select::validator::source_accuracy ||
                        s.validator == df::select::validator::dev;
  o.fit.validation_fraction = held_out ? 0.1 : 0;
  o.fit.validators = {};
  o.threads_per_run = s.threads_per_run;
  return o;
}

// One head: its name, the grid its λ_max is chosen from, and how to sweep it.
struct head_entry {
  const char* key;
  const char* name;
  std::vector<float> grid;
  df::sweep_result (*sweep)(const bench_data&,
                            const df::fit_args&,
                            const df::sweep_grid&,
                            const df::sweep_options&);
  // The same, each run's `score` its reverse validation instead (--per-task --reverse).
  df::sweep_result (*reverse_sweep)(const bench_data&,
                                    const df::fit_args&,
                                    const df::sweep_grid&,
                                    const df::sweep_options&);
};

template <class Step>
df::sweep_result sweep_of(const bench_data& d,
                          const df::fit_args& args,
                          const df::sweep_grid& g,
                          const df::sweep_options& o) {
  return df::sweep<Step>(d.source, d.target, &d.test, args, g, o);
}

// The reverse model of reverse validation: source-only on the target rows labelled by the
// model, with the base arguments (the forward training's lr, batch and steps).
using reverse_step = amazon_step<df::head::source_only<ganin>>;

// A sweep whose runs also carry their reverse validation (train/reverse_validation.hpp) as
// `score`; `scores` are the fit's validators as in df::sweep.
template <class Step>
df::sweep_result reverse_sweep_of(const bench_data& d,
                                  const df::fit_args& args,
                                  const df::sweep_grid& g,
                                  const df::sweep_options& o) {
  df::fit_options fo = o.fit;
  fo.eval_every = args.steps;
  fo.selector = o.selector;
  return df::run_sweep(args, g, o, [&](const df::fit_args& a) {
    Step step(a);
    const df::fit_result f = df::fit(step, d.source, d.target, fo);
    df::sweep_run run;
    run.diverged = f.diverged;
    run.seconds = f.seconds;
    if (f.diverged) return run;
    if (!f.evaluations.empty()) run.scores = f.evaluations.back().scores;
    run.test_accuracy = df::accuracy(step, d.test);
    df::fit_args reverse_args = a;
    reverse_args.lambda_max = 0;
    run.score = df::reverse_validation<reverse_step>(step, d.source, d.target, reverse_args);
    return run;
  });
}

// CORAL's loss is divided by 4F² = 40000 (F = 100): its grid is scaled to match.
const std::vector<float> weights{0.03f, 0.1f, 0.3f, 1.f};
const std::vector<float> coral_weights{300.f, 1000.f, 3000.f, 10000.f};

const head_entry heads[] = {
    {"source_only",
     "source-only",
     {0.f},
     sweep_of<amazon_step<df::head::source_only<ganin>>>,
     reverse_sweep_of<amazon_step<df::head::source_only<ganin>>>},
    {"dann", "DANN", weights, sweep_of<amazon_step<df::head::dann<ganin>>>,
     reverse_sweep_of<amazon_step<df::head::dann<ganin>>>},
    {"cdan", "CDAN", weights, sweep_of<amazon_step<df::head::cdan<ganin>, 200>>,
     reverse_sweep_of<amazon_step<df::head::cdan<ganin>, 200>>},
    {"cdan_e", "CDAN+E", weights, sweep_of<amazon_step<df::head::cdan_e<ganin>, 200>>,
     reverse_sweep_of<amazon_step<df::head::cdan_e<ganin>, 200>>},
    {"mmd", "MMD", weights, sweep_of<amazon_step<df::head::mmd<ganin>>>,
     reverse_sweep_of<amazon_step<df::head::mmd<ganin>>>},
    {"coral", "CORAL", coral_weights, sweep_of<amazon_step<df::head::coral<ganin>>>,
     reverse_sweep_of<amazon_step<df::head::coral<ganin>>>},
    {"mcc", "MCC", weights, sweep_of<amazon_step<df::head::mcc<ganin>>>,
     reverse_sweep_of<amazon_step<df::head::mcc<ganin>>>},
    {"cdan_e+mcc", "CDAN+E + MCC", weights,
     sweep_of<amazon_step<df::head::combine<df::head::cdan_e<ganin>, df::head::mcc<ganin>>, 200>>,
     reverse_sweep_of<
         amazon_step<df::head::combine<df::head::cdan_e<ganin>, df::head::mcc<ganin>>, 200>>},
};

std::vector<std::uint64_t> seeds_up_to(long n) {
  std::vector<std::uint64_t> s;
  for (long i = 1; i <= n; ++i) s.push_back(std::uint64_t(i));
  return s;
}

// One candidate of --per-task: a head and the λ_max values it is tried at.
struct candidate {
  const head_entry* head;
  std::vector<float> lambda;
};

std::vector<candidate> parse_candidates(const std::string& text) {
  std::vector<candidate> out;
  for (const std::string& item : split(text, ',')) {
    const std::size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const head_entry* h = nullptr;
    for (const head_entry& e : heads)
      if (key == e.key) h = &e;
    if (!h || eq == std::string::npos)
      throw std::runtime_error(
          "--per-task: expected HEAD=L1/L2/... with HEAD one of source_only, "
          "dann, cdan, cdan_e, mmd, coral, mcc, cdan_e+mcc; found '" +
          item + "'");
    candidate c{h, {}};
    for (const std::string& v : split(item.substr(eq + 1), '/')) c.lambda.push_back(std::stof(v));
    out.push_back(std::move(c));
  }
  return out;
}

// The validators every --per-task training computes, each of which then chooses per task.
constexpr std::array<df::select::validator, 3> per_task_validators{
    df::select::validator::information_maximization, df::select::validator::entropy,
    df::select::validator::snd};

int run_per_task(const settings& s,
                 const std::filesystem::path& dir,
                 const std::vector<task>& tasks,
                 const std::vector<candidate>& candidates,
                 const std::string& runs_file,
                 bool reverse) {
  const df::fit_args base = base_args(s);
  df::sweep_options o = sweep_options(s);
  o.fit.validation_fraction = 0;  // the protocol: every S_train row is trained on
  o.fit.validators.assign(per_task_validators.begin(), per_task_validators.end());
  if (s.validator == df::select::validator::source_accuracy ||
      s.validator == df::select::validator::dev)
    throw std::runtime_error(
        "--per-task: --validator must read target predictions only (im, "
        "entropy or snd): every S_train row is trained on");
  o.selector = s.validator;
  std::FILE* runs = runs_file.empty() ? nullptr : std::fopen(runs_file.c_str(), "w");
  if (!runs_file.empty() && !runs) throw std::runtime_error("--runs: cannot write " + runs_file);
  const std::size_t nv = per_task_validators.size();
  // The columns: the validators', reverse validation's (--reverse) and the oracle's (last).
  std::vector<std::string> columns;
  for (const df::select::validator v : per_task_validators)
    columns.emplace_back(df::select::name(v));
  if (reverse) columns.emplace_back("reverse");
  columns.emplace_back("oracle");
  const std::size_t oracle_column = columns.size() - 1;
  // chosen[k][t]: column k's choice on task t (an index into configs[t]).
  std::vector<std::vector<df::sweep_configuration>> configs(tasks.size());
  std::vector<std::vector<std::string>> labels(tasks.size());
  std::vector<std::vector<df::index_t>> chosen(columns.size(),
                                               std::vector<df::index_t>(tasks.size(), -1));
  double seconds = 0;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const bench_data d = load(dir, tasks[t]);
    for (const candidate& c : candidates) {
      const df::sweep_grid g{c.lambda, {base.lr}, seeds_up_to(s.seeds)};
      const df::sweep_result r =
          reverse ? c.head->reverse_sweep(d, base, g, o) : c.head->sweep(d, base, g, o);
      seconds += r.seconds;
      for (const df::sweep_configuration& x : r.configurations) {
        configs[t].push_back(x);
        char label[64];
        std::snprintf(label, sizeof label, "%s %g", c.head->name, double(x.lambda_max));
        labels[t].push_back(label);
        std::fprintf(stderr, "%s %s: %.2f ± %.2f %%, im %.4f, entropy %.4f, snd %.4f%s%.4f\n",
                     tasks[t].name().c_str(), label, 100 * x.test_accuracy,
                     100 * x.test_accuracy_std, x.scores[std::size_t(per_task_validators[0])],
                     x.scores[std::size_t(per_task_validators[1])],
                     x.scores[std::size_t(per_task_validators[2])], reverse ? ", reverse " : "",
                     reverse ? x.score : 0.0);
      }
      for (const df::sweep_run& run : r.runs) {
        if (!runs) continue;
        std::fprintf(runs,
                     "{\"task\": \"%s\", \"head\": \"%s\", \"lambda_max\": %g, \"seed\": %llu, "
                     "\"test_accuracy\": %.6f",
                     tasks[t].name().c_str(), c.head->key, double(run.lambda_max),
                     static_cast<unsigned long long>(run.seed), run.test_accuracy);
        for (const df::select::validator v : per_task_validators)
          std::fprintf(runs, ", \"%s\": %.6f", std::string(df::select::name(v)).c_str(),
                       run.scores[std::size_t(v)]);
        if (reverse) std::fprintf(runs, ", \"reverse\": %.6f", run.score);
        std::fprintf(runs, "}\n");
      }
      if (runs) std::fflush(runs);
    }
    for (std::size_t v = 0; v < nv; ++v)
      chosen[v][t] = df::best_by(configs[t], per_task_validators[v]);
    // Reverse validation's choice: the best mean reverse accuracy (higher is better).
    // The oracle's: the best T_test accuracy; it reads target labels, reported apart.
    const auto arg_best = [&](auto value) {
      df::index_t best = -1;
      for (std::size_t k = 0; k < configs[t].size(); ++k)
        if (std::isfinite(value(configs[t][k])) &&
            (best < 0 || value(configs[t][k]) > value(configs[t][std::size_t(best)])))
          best = df::index_t(k);
      return best;
    };
    if (reverse) chosen[nv][t] = arg_best([](const df::sweep_configuration& x) { return x.score; });
    chosen[oracle_column][t] =
        arg_best([](const df::sweep_configuration& x) { return x.test_accuracy; });
  }
  if (runs) std::fclose(runs);

  std::printf("\nper-task choice among");
  for (const candidate& c : candidates) {
    std::printf(" %s (λ", c.head->name);
    for (const float l : c.lambda) std::printf(" %g", double(l));
    std::printf(")");
  }
  std::printf(
      "; T_test accuracy of each choice, mean ± std over seeds 1..%ld; the last column reads "
      "T_test labels (oracle)\n\n| task |",
      s.seeds);
  for (const std::string& c : columns) std::printf(" %s's choice |", c.c_str());
  std::printf("\n| --- |");
  for (std::size_t k = 0; k < columns.size(); ++k) std::printf(" --- |");
  std::printf("\n");
  std::vector<double> average(columns.size(), 0.0);
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    std::printf("| %s |", tasks[t].name().c_str());
    for (std::size_t v = 0; v < columns.size(); ++v) {
      const df::index_t k = chosen[v][t];
      if (k < 0) {
        std::printf(" none |");
        continue;
      }
      const df::sweep_configuration& x = configs[t][std::size_t(k)];
      std::printf(" %s: %.2f ± %.2f |", labels[t][std::size_t(k)].c_str(), 100 * x.test_accuracy,
                  100 * x.test_accuracy_std);
      average[v] += x.test_accuracy / double(tasks.size());
    }
    std::printf("\n");
  }
  std::printf("| **average** |");
  for (const double a : average) std::printf(" **%.2f** |", 100 * a);
  std::printf("\n\n%.1f s of sweeps in all\n{\"tasks\": %zu, \"seeds\": %ld, \"steps\": %ld",
              seconds, tasks.size(), s.seeds, s.steps);
  for (std::size_t v = 0; v < columns.size(); ++v)
    std::printf(", \"%s\": %.4f", columns[v].c_str(), average[v]);
  std::printf("}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  settings s;
  s.seeds = examples::option(argc, argv, "--seeds", 5);
  s.steps = examples::option(argc, argv, "--steps", 2000);
  s.selection_seeds = examples::option(argc, argv, "--selection-seeds", 3);
  s.threads_per_run = int(examples::option(argc, argv, "--threads-per-run", 1));
  s.validator = df::select::parse_validator(examples::text_option(argc, argv, "--validator", "im"),
                                            "--validator");
  const std::filesystem::path dir = examples::text_option(
      argc, argv, "--data", std::string(DAFUSE_SHARED_DATA_DIR) + "/amazon_reviews");
  if (!std::filesystem::is_directory(dir)) {
    std::printf("no Amazon reviews data in %s (pass --data DIR): nothing to do\n",
                dir.string().c_str());
    return 0;
  }
  std::vector<task> tasks;
  const std::string task_list = examples::text_option(argc, argv, "--tasks", "all");
  if (task_list == "all") {
    for (const char* a : domains)
      for (const char* b : domains)
        if (std::string(a) != b) tasks.push_back({a, b});
  } else {
    for (const std::string& t : split(task_list, ',')) tasks.push_back(parse_task(t));
  }
  const std::string wanted = "," +
                             examples::text_option(argc, argv, "--heads",
                                                   "source_only,dann,cdan,cdan_e,mmd,coral,mcc,"
                                                   "cdan_e+mcc") +
                             ",";
  std::map<std::string, float> fixed;  // --lambda HEAD=V: no selection for HEAD
  for (const std::string& kv : split(examples::text_option(argc, argv, "--lambda", ""), ',')) {
    if (kv.empty()) continue;
    const std::size_t eq = kv.find('=');
    if (eq == std::string::npos) throw std::runtime_error("--lambda: expected HEAD=V, found " + kv);
    fixed[kv.substr(0, eq)] = std::stof(kv.substr(eq + 1));
  }
  const std::string per_task_list = examples::text_option(argc, argv, "--per-task", "");
  if (!per_task_list.empty())
    return run_per_task(s, dir, tasks, parse_candidates(per_task_list),
                        examples::text_option(argc, argv, "--runs", ""),
                        examples::option(argc, argv, "--reverse", 0) != 0);
  const task selection_task =
      parse_task(examples::text_option(argc, argv, "--select", "dvd->books"));
  const df::fit_args base = base_args(s);
  const df::sweep_options options = sweep_options(s);
  // The table's trainings use every S_train row (the protocol) and score nothing that matters:
  // entropy is the cheapest selector and needs no held-out rows.
  df::sweep_options table_options = options;
  table_options.selector = df::select::validator::entropy;
  table_options.fit.validation_fraction = 0;
  std::printf(
      "Amazon reviews, %zu task(s), %ld seed(s) of %ld steps per head and task; λ_max "
      "chosen on %s by %s (label-free, %ld seed(s)); %d processor(s), %d thread(s) per "
      "training\n",
      tasks.size(), s.seeds, s.steps, selection_task.name().c_str(),
      std::string(df::select::name(s.validator)).c_str(), s.selection_seeds,
      df::usable_processors(), s.threads_per_run);

  // 1. λ_max per head, on the selection task.
  std::vector<const head_entry*> chosen_heads;
  std::vector<float> lambda;
  {
    const bench_data d = load(dir, selection_task);
    std::printf(
        "\nselection on %s: mean over seeds 1..%ld; the oracle column reads %s test "
        "labels and is shown only to judge the validator\n",
        selection_task.name().c_str(), s.selection_seeds, selection_task.target.c_str());
    std::printf("| head | λ_max | %s (label-free) | target test accuracy (oracle) |\n",
                std::string(df::select::name(s.validator)).c_str());
    std::printf("| --- | --- | --- | --- |\n");
    for (const head_entry& h : heads) {
      if (wanted.find("," + std::string(h.key) + ",") == std::string::npos) continue;
      chosen_heads.push_back(&h);
      if (fixed.count(h.key)) {
        lambda.push_back(fixed[h.key]);
        continue;
      }
      if (h.grid.size() == 1) {
        lambda.push_back(h.grid[0]);
        continue;
      }
      const df::sweep_result r =
          h.sweep(d, base, {h.grid, {base.lr}, seeds_up_to(s.selection_seeds)}, options);
      for (std::size_t c = 0; c < r.configurations.size(); ++c) {
        const df::sweep_configuration& x = r.configurations[c];
        std::printf("| %s | %g | %.4f%s | %.2f ± %.2f %%%s |\n", h.name, double(x.lambda_max),
                    x.score, df::index_t(c) == r.selected ? " (selected)" : "",
                    100 * x.test_accuracy, 100 * x.test_accuracy_std,
                    df::index_t(c) == r.oracle ? " (oracle's choice)" : "");
      }
      lambda.push_back(r.selected >= 0 ? r.configurations[std::size_t(r.selected)].lambda_max
                                       : h.grid[0]);
    }
  }

  // 2. Every task with the λ_max fixed above.
  std::vector<std::vector<df::sweep_configuration>> table(tasks.size());
  double seconds = 0;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const bench_data d = load(dir, tasks[t]);
    for (std::size_t h = 0; h < chosen_heads.size(); ++h) {
      const df::sweep_result r = chosen_heads[h]->sweep(
          d, base, {{lambda[h]}, {base.lr}, seeds_up_to(s.seeds)}, table_options);
      table[t].push_back(r.configurations[0]);
      seconds += r.seconds;
      std::fprintf(stderr, "%s %s: %.2f ± %.2f %% (%.1f s)\n", tasks[t].name().c_str(),
                   chosen_heads[h]->name, 100 * r.configurations[0].test_accuracy,
                   100 * r.configurations[0].test_accuracy_std, r.seconds);
    }
  }
  std::printf("\ntarget test accuracy, mean ± std over seeds 1..%ld (λ_max fixed as above)\n\n",
              s.seeds);
  std::printf("| task |");
  for (std::size_t h = 0; h < chosen_heads.size(); ++h)
    std::printf(" %s (λ %g) |", chosen_heads[h]->name, double(lambda[h]));
  std::printf("\n| --- |");
  for (std::size_t h = 0; h < chosen_heads.size(); ++h) std::printf(" --- |");
  std::printf("\n");
  std::vector<double> average(chosen_heads.size(), 0.0);
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    std::printf("| %s |", tasks[t].name().c_str());
    for (std::size_t h = 0; h < chosen_heads.size(); ++h) {
      const df::sweep_configuration& x = table[t][h];
      std::printf(" %.2f ± %.2f |", 100 * x.test_accuracy, 100 * x.test_accuracy_std);
      average[h] += x.test_accuracy / double(tasks.size());
    }
    std::printf("\n");
  }
  std::printf("| **average** |");
  for (const double a : average) std::printf(" **%.2f** |", 100 * a);
  std::printf("\n\n%.1f s of sweeps in all\n{\"tasks\": %zu, \"seeds\": %ld, \"steps\": %ld",
              seconds, tasks.size(), s.seeds, s.steps);
  for (std::size_t h = 0; h < chosen_heads.size(); ++h)
    std::printf(", \"%s\": {\"lambda_max\": %g, \"average\": %.4f}", chosen_heads[h]->key,
                double(lambda[h]), average[h]);
  std::printf("}\n");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
