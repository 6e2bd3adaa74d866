// Training beside other work: the time per iteration (fill + step) of digits-mlp and office-head
// (loader::resident, as the demo) and amazon (sparse batches) on 1 and 2 threads, first on a quiet
// machine, then with one busy process per processor, which this program starts (fork) and stops.
// The two thread counts alternate in rounds, so drift of the host's speed falls on both alike.
// Reported: the mean (total time / iterations: what a run's length sees, stalls included) and
// the median per iteration, and 2-thread mean / 1-thread mean. Nothing is asserted.
//
// Run: build/bench/busy_bench [--configs a,b] [--seconds S] [--rounds R] [--busy N]
// (S: seconds of iterations per measurement, default 1; N: busy processes, default one per
// processor). Linux only (fork, prctl).
#include <dafuse/dafuse.hpp>

#include "configs.hpp"
#include "timing.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <omp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace df = dafuse;

namespace {

using namespace bench;

//! Busy processes, one spinning loop each, alive from construction to destruction (and killed
//! with this process if it dies first).
class busy_processes {
 public:
  explicit busy_processes(int count) {
    for (int i = 0; i < count; ++i) {
      const pid_t pid = fork();
      if (pid < 0) {
        std::perror("busy_bench: fork");
        std::exit(1);
      }
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        volatile unsigned long x = 0;
        for (;;) x = x * 6364136223846793005ul + 1;
      }
      pids_.push_back(pid);
    }
  }
  busy_processes(const busy_processes&) = delete;
  busy_processes& operator=(const busy_processes&) = delete;
  ~busy_processes() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }

 private:
  std::vector<pid_t> pids_;
};

struct times {
  std::vector<double> us;  // every timed iteration of every round
  double total_s = 0;
};

//! One thread count's step and loader, built with that many OpenMP threads.
template <class Step, class Loader>
struct trainer {
  Step step;
  Loader loader;
  void iterate() {
    if constexpr (Step::sparse_input)
      loader.fill(step.sparse_batch(), step.source_labels());
    else
      loader.fill(step.input(), step.source_labels());
    step.run();
  }
};

df::fit_args args_for(df::index_t batch) {
  return {.steps = 100000000, .batch = batch, .lr = 0.01f, .momentum = 0.9f, .seed = 1};
}

//! Times `seconds` of iterations of `t` on `threads` threads (after a short warm-up).
template <class T>
void time_round(T& t, int threads, double seconds, times& out) {
  omp_set_num_threads(threads);
  for (int w = 0; w < 10; ++w) t.iterate();
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    t.iterate();
    const auto t1 = std::chrono::steady_clock::now();
    out.us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (std::chrono::duration<double>(t1 - start).count() >= seconds) {
      out.total_s += std::chrono::duration<double>(t1 - start).count();
      return;
    }
  }
}

struct row {
  std::string config, load;
  timing one, two;
  double one_mean_us, two_mean_us;
};

template <class Make>
void measure(const char* config,
             const char* load,
             Make&& make,
             double seconds,
             int rounds,
             std::vector<row>& out) {
  omp_set_num_threads(1);
  auto one = make();
  omp_set_num_threads(2);
  auto two = make();
  times a, b;
  for (int r = 0; r < rounds; ++r) {
    // Alternate which goes first, so neither always follows the other.
    if (r % 2 == 0) {
      time_round(*one, 1, seconds, a);
      time_round(*two, 2, seconds, b);
    } else {
      time_round(*two, 2, seconds, b);
      time_round(*one, 1, seconds, a);
    }
  }
  const auto mean = [](const times& t) { return 1e6 * t.total_s / double(t.us.size()); };
  out.push_back({config, load, quartiles(a.us), quartiles(b.us), mean(a), mean(b)});
  const row& x = out.back();
  std::printf(
      "%-12s %-6s 1 thread %9.1f us (median %8.1f)   2 threads %9.1f us (median %8.1f)"
      "   2/1 %.2f\n",
      config, load, x.one_mean_us, x.one.median, x.two_mean_us, x.two.median,
      x.two_mean_us / x.one_mean_us);
  std::fflush(stdout);
}

using dann = df::head::dann<df::schedule::ganin>;
template <class Cfg, class Loader>
using step_of = df::train_step<typename Cfg::net,
                               Loader,
                               df::precision::fp32,
                               df::clip::none,
                               dann,
                               df::optim::sgd>;

template <class Cfg>
auto dense_maker(const df::data::dataset& source, const df::data::dataset& target) {
  using step_type = step_of<Cfg, df::loader::resident>;
  using loader_type = df::data::batcher<df::loader::resident, typename step_type::system_type>;
  using trainer_type = trainer<step_type, loader_type>;
  return [&source, &target] {
    return std::unique_ptr<trainer_type>(new trainer_type{
        step_type(args_for(Cfg::batch)), loader_type(source, target, Cfg::batch, 1, true)});
  };
}

}  // namespace

int main(int argc, char** argv) {
  std::string configs = "digits-mlp,office-head,amazon";
  double seconds = 1;
  int rounds = 4;
  int busy = int(sysconf(_SC_NPROCESSORS_ONLN));
  std::filesystem::path data_dir = DAFUSE_SHARED_DATA_DIR;
  for (int i = 1; i < argc; ++i) {
    const auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "busy_bench: %s takes a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--configs"))
      configs = value("--configs");
    else if (!std::strcmp(argv[i], "--seconds"))
      seconds = std::atof(value("--seconds"));
    else if (!std::strcmp(argv[i], "--rounds"))
      rounds = std::atoi(value("--rounds"));
    else if (!std::strcmp(argv[i], "--busy"))
      busy = std::atoi(value("--busy"));
    else if (!std::strcmp(argv[i], "--data"))
      data_dir = value("--data");
    else {
      std::fprintf(stderr,
                   "usage: busy_bench [--configs a,b] [--seconds S] [--rounds R] [--busy N] "
                   "[--data DIR]\n");
      return 2;
    }
  }
  if (seconds <= 0 || rounds < 1 || busy < 1) {
    std::fprintf(stderr, "busy_bench: --seconds > 0, --rounds >= 1 and --busy >= 1 expected\n");
    return 2;
  }
  const auto wanted = [&](const char* name) {
    return ("," + configs + ",").find("," + std::string(name) + ",") != std::string::npos;
  };
  std::printf("%d processors; busy: %d spinning processes; %d rounds of %.1f s per thread count\n",
              int(sysconf(_SC_NPROCESSORS_ONLN)), busy, rounds, seconds);
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("OMP_WAIT_POLICY=%s\n", policy ? policy : "(unset)");

  std::vector<row> rows;
  const auto both_loads = [&](const char* name, auto&& make) {
    measure(name, "quiet", make, seconds, rounds, rows);
    busy_processes load(busy);
    measure(name, "busy", make, seconds, rounds, rows);
  };
  if (wanted("digits-mlp")) {
    using net = digits_mlp::net;
    const auto s = random_rows(4096, net::input_width, net::class_count, df::data::domain::source);
    const auto t = random_rows(4096, net::input_width, net::class_count, df::data::domain::target);
    both_loads(digits_mlp::name, dense_maker<digits_mlp>(s, t));
  }
  if (wanted("office-head")) {
    using net = office_head::net;
    const auto s = random_rows(2048, net::input_width, net::class_count, df::data::domain::source);
    const auto t = random_rows(2048, net::input_width, net::class_count, df::data::domain::target);
    both_loads(office_head::name, dense_maker<office_head>(s, t));
  }
  if (wanted("amazon")) {
    const sparse_pair d = amazon_data(data_dir);
    using step_type = step_of<amazon, df::loader::sync>;
    using trainer_type = trainer<step_type, df::data::sparse_batcher>;
    both_loads(amazon::name, [&d] {
      return std::unique_ptr<trainer_type>(
          new trainer_type{step_type(args_for(amazon::batch)),
                           df::data::sparse_batcher(d.source, d.target, amazon::batch, 1, true)});
    });
  }
  std::printf(
      "\n| config | load | 1 thread, mean (median) | 2 threads, mean (median) | 2 / 1 |\n"
      "| --- | --- | --- | --- | --- |\n");
  for (const row& x : rows)
    std::printf("| %s | %s | %.0f µs (%.0f) | %.0f µs (%.0f) | %.2f |\n", x.config.c_str(),
                x.load.c_str(), x.one_mean_us, x.one.median, x.two_mean_us, x.two.median,
                x.two_mean_us / x.one_mean_us);
}
