// SPDX-License-Identifier: Apache-2.0
// dafuse-train's stop signals (SIGTERM, SIGINT, SIGHUP) during a training: the first ends the run
// after the step it is in, as --stop-after would there (checkpoint, outputs, exit 128 + signal);
// a second exits at once (docs/cli.md, "Signals").
#pragma once

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>

namespace dafuse_train {

namespace detail {
// The first stop signal caught (0: none). A signal may run its handler on any of the process's
// threads (OpenMP's, the loader's), so the loop reads an atomic; a lock-free one is also
// async-signal-safe to write from the handler.
inline std::atomic<int> caught_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal flag must be lock-free");

// Only async-signal-safe calls: an atomic exchange, write and _exit. A save in progress leaves its
// temporary file, never a partial target (core/file.hpp), and the next save of that path
// removes it.
inline void on_stop_signal(int sig) {
  if (caught_signal.exchange(sig) == 0) return;
  static constexpr char text[] = "dafuse-train: a second signal: exiting at once\n";
  (void)!::write(STDERR_FILENO, text, sizeof text - 1);
  ::_exit(128 + sig);
}
}  // namespace detail

//! The signals that stop a training: a scheduler's (SIGTERM), the terminal's (SIGINT, SIGHUP).
inline constexpr std::array<int, 3> stop_signals{SIGTERM, SIGINT, SIGHUP};

//! "SIGTERM", "SIGINT" or "SIGHUP".
inline const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

//! Catches the stop signals while it lives (a training and the writing of its outputs), then puts
//! the previous handlers back. A signal ignored when it starts stays ignored: `nohup` (SIGHUP) and
//! a script's background jobs (SIGINT) ask for that.
class stop_signal_catcher {
 public:
  stop_signal_catcher() {
    detail::caught_signal.store(0);
    struct sigaction catching {};
    catching.sa_handler = detail::on_stop_signal;
    ::sigemptyset(&catching.sa_mask);
    for (const int s : stop_signals) ::sigaddset(&catching.sa_mask, s);
    // Interrupted reads and writes continue: the loop, not the system call, ends the run.
    catching.sa_flags = SA_RESTART;
    for (std::size_t i = 0; i < stop_signals.size(); ++i) {
      installed_[i] = ::sigaction(stop_signals[i], nullptr, &previous_[i]) == 0 &&
                      previous_[i].sa_handler != SIG_IGN &&
                      ::sigaction(stop_signals[i], &catching, nullptr) == 0;
    }
  }
  ~stop_signal_catcher() {
    for (std::size_t i = 0; i < stop_signals.size(); ++i)
      if (installed_[i]) ::sigaction(stop_signals[i], &previous_[i], nullptr);
  }
  stop_signal_catcher(const stop_signal_catcher&) = delete;
  stop_signal_catcher& operator=(const stop_signal_catcher&) = delete;

  //! The first stop signal caught since this started (0: none).
  static int caught() { return detail::caught_signal.load(); }

 private:
  std::array<struct sigaction, stop_signals.size()> previous_{};
  std::array<bool, stop_signals.size()> installed_{};
};

}  // namespace dafuse_train
