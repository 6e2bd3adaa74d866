// SPDX-License-Identifier: Apache-2.0
#include "jit.hpp"

#if defined(DAFUSE_TRAIN_COMPILED_NETWORK)

namespace dafuse_train {
// A compiled network program runs its own network only (main.cpp checks the type first).
void run_network_program(const config&, const std::string& type, char**) {
  throw std::runtime_error("this program was compiled for another network than " + type);
}
}  // namespace dafuse_train

#else

#include "jit_config.hpp"
#include "precheck.hpp"

#include <dafuse/core/crc32.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/file.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace dafuse_train {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    if (end > at) out.emplace_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::vector<std::string> words_of(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// FNV-1a, 64 bits: names a cached program after everything that decides its code.
std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h = 14695981039346656037ull) {
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// This program's own file: where it runs from (installed or in a build tree), and a stamp that
// changes whenever it is rebuilt with other headers.
fs::path self_path() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p;
}

std::string file_stamp(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return "?";
  return std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

// The prebuilt part of a network's program (meson.build, dafuse-train-cli*.o) and the -march it
// and the network's unit are compiled with: a portable build's copy names its own, so a network
// is compiled for the instruction set of the copy this CPU runs.
#if defined(DAFUSE_TRAIN_COPY)
constexpr const char* prebuilt_name = "dafuse-train-cli-" DAFUSE_TRAIN_COPY ".o";
std::vector<std::string> program_march() {
  return words_of(DAFUSE_TRAIN_MARCH);
}
#else
constexpr const char* prebuilt_name = "dafuse-train-cli.o";
std::vector<std::string> program_march() {
  return lines_of(DAFUSE_TRAIN_CXX_MARCH);
}
#endif

// Where the headers, dafuse-train's headers and its prebuilt part are: the installed copies when
// this program is the installed one, else the source and build trees it was built from.
struct source_dirs {
  fs::path include, app, prebuilt;
};
source_dirs find_sources() {
  std::error_code ec;
  const fs::path self = self_path();
  const fs::path installed_bin = fs::weakly_canonical(DAFUSE_TRAIN_INSTALLED_BIN, ec);
  if (!self.empty() && !installed_bin.empty() && self.parent_path() == installed_bin)
    return {DAFUSE_TRAIN_INSTALLED_INCLUDE, DAFUSE_TRAIN_INSTALLED_APP,
            fs::path(DAFUSE_TRAIN_INSTALLED_PREBUILT) / prebuilt_name};
  return {DAFUSE_TRAIN_SOURCE_INCLUDE, DAFUSE_TRAIN_SOURCE_APP,
          fs::path(DAFUSE_TRAIN_BUILD_PREBUILT) / prebuilt_name};
}

// The folder of compiled networks. Never a shared one (such as /tmp): a program found there is
// run as the user, so a folder another user can write would run their program as you.
fs::path cache_dir() {
  if (const char* d = std::getenv("DAFUSE_TRAIN_CACHE"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "dafuse-train";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "dafuse-train";
  throw dafuse::error(
      "no folder for compiled networks: DAFUSE_TRAIN_CACHE, XDG_CACHE_HOME and HOME are all "
      "unset; set DAFUSE_TRAIN_CACHE to a folder of your own (dafuse-train runs the programs it "
      "finds there, so it uses no shared folder such as /tmp)");
}

// Why another user could change what `st` describes (the cache's folder, or one of its programs),
// or "" when none can: a real folder or regular file, owned by this user, writable by no group or
// other.
std::string foreign_reason(const struct stat& st, bool folder) {
  if (folder ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
    return folder ? "expected a folder, found another kind of file (a link?)"
                  : "expected a regular file, found another kind (a link?)";
  if (st.st_uid != ::geteuid())
    return "expected it to be owned by you (uid " + std::to_string(::geteuid()) + "), found uid " +
           std::to_string(st.st_uid);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    return std::string("expected no write permission for group or others, found mode ") + mode;
  }
  return "";
}

// Creates the cache folder (mode 0700) or checks the one there: refuses one another user could
// write, with the reason and the way out.
void prepare_private_folder(const fs::path& dir) {
  std::error_code ec;
  const bool created = fs::create_directories(dir, ec);
  if (ec)
    throw dafuse::error(dir.string() + ": cannot create the cache of compiled networks: " +
                        ec.message() + " (set DAFUSE_TRAIN_CACHE to another folder)");
  if (created) ::chmod(dir.c_str(), 0700);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    throw dafuse::error(dir.string() +
                        ": cannot read the cache of compiled networks: " + std::strerror(errno));
  if (const std::string why = foreign_reason(st, true); !why.empty())
    throw dafuse::error(dir.string() + ": the cache of compiled networks: " + why +
                        "; a program found there would run as you (chmod go-w it, or set "
                        "DAFUSE_TRAIN_CACHE to a folder of your own)");
}

// The CPU this runs on, for the cache key: a program built for -march=native on one CPU must not
// run on another that shares the home folder. The first processor's flags (x86) or features
// (Arm) line of /proc/cpuinfo, and its model name.
std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string identity;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("flags") || line.starts_with("Features") ||
        line.starts_with("model name") || line.starts_with("CPU part")) {
      if (identity.find(line.substr(0, line.find(':'))) != std::string::npos) break;  // processor 1
      identity += line + "\n";
    }
  }
  return identity;
}

// A quoted #include of `file`, by its absolute path: the generated unit lies in the cache folder,
// and a quoted include searches the unit's own folder first, so a run.hpp left there would be
// compiled instead of dafuse-train's.
std::string include_line(const fs::path& file) {
  const std::string path = fs::absolute(file).lexically_normal().string();
  if (path.find_first_of("\"\\\n") != std::string::npos)
    throw dafuse::error(path +
                        ": expected a path without quotes, backslashes or line breaks for "
                        "dafuse-train's sources");
  return "#include \"" + path + "\"\n";
}

// The C++ of the program's one unit of its own: the network's registry entry, as a models_*.cpp
// holds a family's, and the registry (registry.cpp's functions) with that entry alone. The rest
// of dafuse-train is prebuilt (`prebuilt`) and linked with it.
std::string program_source(const network_text& n,
                           const std::string& type,
                           const fs::path& app,
                           const fs::path& prebuilt) {
  const std::string description = network_description(n);
  return "// Generated by dafuse-train (apps/dafuse_train/jit.cpp) for the network\n"
         "//   " +
         description +
         "\n"
         "// Its registry entry; the rest of dafuse-train is " +
         prebuilt.string() + ".\n" + include_line(app / "registry.hpp") +
         include_line(app / "run.hpp") +
         "\n"
         "namespace dafuse_train {\nnamespace {\nusing step = " +
         type +
         ";\n"
         "const compiled_entry entry{{\"custom\", \"" +
         description +
         "\", step::input_width,\n"
         "                            step::class_count, step::sparse_input, model_defaults{},\n"
         "                            run_model<step>},\n"
         "                           \"" +
         type +
         "\"};\n}  // namespace\n"
         "std::vector<model_entry> all_models() { return {}; }\n"
         "const compiled_entry* compiled_network() { return &entry; }\n"
         "}  // namespace dafuse_train\n";
}

// Runs `args` with stdout and stderr into `log`; returns the exit status (-1: not run). The
// compiler runs under a supervisor that leads a process group of its own and is told when
// dafuse-train dies (PR_SET_PDEATHSIG): it then kills the whole group (driver, cc1plus, as, ld),
// so a killed dafuse-train leaves no compiler running.
int run_compiler(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::setpgid(0, 0);
    struct sigaction kill_group {};
    kill_group.sa_handler = [](int) { ::kill(0, SIGKILL); };
    ::sigaction(SIGTERM, &kill_group, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::kill(0, SIGKILL);  // dafuse-train died before prctl
    const pid_t compiler = ::fork();
    if (compiler == 0) {
      ::signal(SIGTERM, SIG_DFL);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
      }
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "cannot run %s: %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    int status = 0;
    while (compiler > 0 && ::waitpid(compiler, &status, 0) < 0)
      if (errno != EINTR) ::_exit(126);
    ::_exit(compiler < 0 ? 126 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  int status = 0;
  for (long tenths = 0;; ++tenths) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return -1;
    if (tenths > 0 && tenths % 300 == 0)
      std::fprintf(stderr, "dafuse-train: still compiling (%ld s)...\n", tenths / 10);
    ::usleep(100000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// User and system time of this process's waited-for children: the compiler's, once its
// supervisor (which waited for it) has been waited for. CPU-s say what a compile costs on a busy
// machine better than its wall time.
double children_cpu_seconds() {
  struct rusage u {};
  ::getrusage(RUSAGE_CHILDREN, &u);
  const auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

// The first line of the compiler's output that carries a dafuse: message (a refused
// combination), without the compiler's location prefix. "dafuse: " with its space: type names in
// the same output say dafuse::.
std::string first_dafuse_message(const fs::path& log) {
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);)
    if (const std::size_t at = line.find("dafuse: "); at != std::string::npos) {
      std::string m = line.substr(at);
      while (!m.empty() && (m.back() == '"' || m.back() == '\'' || m.back() == ')')) m.pop_back();
      return m;
    }
  return "";
}

// The compiler's first error line (GCC and clang: "file:line:col: error: ..."), or its first
// line when none says error.
std::string first_error_line(const fs::path& log) {
  std::ifstream in(log);
  std::string first;
  for (std::string line; std::getline(in, line);) {
    if (line.find("error:") != std::string::npos) return line.substr(0, 300);
    if (first.empty()) first = line.substr(0, 300);
  }
  return first;
}

// The CRC-32 of the file open at `fd`, and its size, read from the start.
std::string checksum_of(int fd) {
  std::vector<unsigned char> buffer(1 << 16);
  std::uint32_t crc = 0;
  std::uint64_t size = 0;
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "unreadable: " + dafuse::detail::os_reason(errno);
    if (n == 0) break;
    crc = dafuse::detail::crc32(buffer.data(), std::size_t(n), crc);
    at += n;
    size += std::uint64_t(n);
  }
  char text[64];
  std::snprintf(text, sizeof text, "crc32 %08x size %llu\n", crc,
                static_cast<unsigned long long>(size));
  return text;
}

// Opens the cached `program` for running, or returns -1 when it is missing or damaged: its
// checksum is not the one stored beside it at compile time (`sum`), or either file is missing. A
// damaged program is removed, saying so. Another user's or a writable program is refused.
int open_cached_program(const fs::path& program, const fs::path& sum) {
  const int fd = ::open(program.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return -1;
    throw dafuse::error(program.string() +
                        ": cannot open the compiled network: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw dafuse::error(program.string() +
                        ": cannot open the compiled network: " + std::strerror(err));
  }
  if (const std::string why = foreign_reason(st, false); !why.empty()) {
    ::close(fd);
    throw dafuse::error(program.string() + ": refused to run this compiled network: " + why +
                        " (remove it, or set DAFUSE_TRAIN_CACHE to a folder of your own)");
  }
  std::string stored;
  try {
    const std::vector<unsigned char> bytes =
        dafuse::detail::input_file(sum, sum.string()).read_all("checksum");
    stored.assign(bytes.begin(), bytes.end());
  } catch (const dafuse::error&) {
    stored.clear();
  }
  const std::string actual = checksum_of(fd);
  if (!stored.empty() && stored == actual) return fd;
  ::close(fd);
  std::fprintf(stderr, "dafuse-train: %s: damaged (%s); discarded, compiling the network again\n",
               program.c_str(),
               stored.empty() ? "no checksum beside it"
                              : ("its checksum is " + actual.substr(0, actual.size() - 1) +
                                 ", not " + stored.substr(0, stored.find('\n')))
                                    .c_str());
  std::error_code ec;
  fs::remove(program, ec);
  fs::remove(sum, ec);
  return -1;
}

// Files `stem`.<pid>, `stem`.<pid>.cpp and `stem`.<pid>.log: a compile's own, left behind when
// its dafuse-train was killed. Called with the network's lock held, so no compile is running.
void remove_abandoned_files(const fs::path& dir, const std::string& stem) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(stem + ".")) continue;
    std::string rest = name.substr(stem.size() + 1);
    for (const char* suffix : {".cpp", ".log"})
      if (rest.ends_with(suffix)) rest.resize(rest.size() - 4);
    if (!rest.empty() && rest.find_first_not_of("0123456789") == std::string::npos) {
      std::error_code gone;
      fs::remove(it->path(), gone);
    }
  }
}

// Holds the lock of one network while it is checked and compiled: a second dafuse-train of the
// same new network waits, then runs the program the first compiled.
class network_lock {
 public:
  explicit network_lock(const fs::path& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    struct stat st {};
    if (fd_ < 0 || ::fstat(fd_, &st) != 0)
      throw dafuse::error(path.string() +
                          ": cannot open the compile lock: " + std::strerror(errno));
    if (const std::string why = foreign_reason(st, false); !why.empty())
      throw dafuse::error(path.string() + ": refused the compile lock: " + why);
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    std::fprintf(stderr,
                 "dafuse-train: another dafuse-train is compiling this network; waiting for "
                 "it...\n");
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR)
        throw dafuse::error(path.string() +
                            ": cannot take the compile lock: " + std::strerror(errno));
  }
  network_lock(const network_lock&) = delete;
  network_lock& operator=(const network_lock&) = delete;
  ~network_lock() { ::close(fd_); }

 private:
  int fd_ = -1;
};

// Compiles the program into dir/stem, with its checksum beside it (stem.crc32), both written
// through a temporary, flushed to disk and renamed: a crash leaves the old state or the new one,
// and a program without its checksum is compiled again. Prints the last compile's time as an
// estimate, and a line every 30 s while the compiler runs.
void compile_network(const std::vector<std::string>& compiler,
                     const std::vector<std::string>& flags,
                     const source_dirs& src,
                     const std::string& source,
                     const fs::path& dir,
                     const std::string& stem) {
  std::error_code ec;
  const std::string mine = stem + "." + std::to_string(::getpid());
  const fs::path cpp = dir / (mine + ".cpp"), log = dir / (mine + ".log"), tmp = dir / mine;
  const fs::path timing = dir / "last-compile-seconds";
  dafuse::detail::write_file_atomically(cpp, source);
  std::vector<std::string> args = compiler;
  args.insert(args.end(), flags.begin(), flags.end());
  const std::vector<std::string> march = program_march(), unit = lines_of(DAFUSE_TRAIN_CXX_UNIT);
  args.insert(args.end(), march.begin(), march.end());
  args.insert(args.end(), unit.begin(), unit.end());
  // The prebuilt part first: the linker keeps the first definition of each inline function
  // both define, and with -flto the unit's copy is then never compiled.
  args.insert(args.end(), {"-I" + src.app.string(), "-I" + src.include.string(),
                           src.prebuilt.string(), cpp.string(), "-o", tmp.string()});
  double last = 0;
  if (std::ifstream in(timing); in) in >> last;
  std::fprintf(
      stderr, "dafuse-train: compiling this network's step (once; cached in %s)%s...\n",
      dir.c_str(),
      last > 0 ? (", about " + std::to_string(long(last + 0.5)) + " s as last time").c_str() : "");
  // A signal now ends dafuse-train (the compiler's supervisor then ends the compile): there is no
  // step to finish yet.
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
  const auto start = std::chrono::steady_clock::now();
  const double cpu_before = children_cpu_seconds();
  const int status = run_compiler(args, log);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu_seconds = children_cpu_seconds() - cpu_before;
  if (status != 0) {
    fs::remove(tmp, ec);
    if (const std::string m = first_dafuse_message(log); !m.empty())
      throw network_error("the network does not compile: " + m +
                          " (the compiler's output: " + log.string() + ")");
    throw dafuse::error("compiling the network failed (" + compiler.front() + " exited with " +
                        std::to_string(status) + ": " + first_error_line(log) + "; its output: " +
                        log.string() + "; DAFUSE_TRAIN_CXX names another compiler)");
  }
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    throw dafuse::error(tmp.string() +
                        ": cannot read the compiled network: " + std::strerror(errno));
  while (::fsync(fd) != 0 && errno == EINTR) {
  }
  const std::string checksum = checksum_of(fd);
  ::close(fd);
  ::chmod(tmp.c_str(), 0700);
  if (::rename(tmp.c_str(), (dir / stem).c_str()) != 0) {
    const int err = errno;
    fs::remove(tmp, ec);
    throw dafuse::error((dir / stem).string() +
                        ": cannot store the compiled network: " + dafuse::detail::os_reason(err));
  }
  dafuse::detail::write_file_atomically(dir / (stem + ".crc32"), checksum);
  dafuse::detail::write_file_atomically(timing, std::to_string(seconds) + "\n");
  fs::rename(cpp, dir / (stem + ".cpp"), ec);  // kept beside the program, to read
  fs::remove(log, ec);
  std::fprintf(stderr, "dafuse-train: compiled in %.1f s (%.1f CPU-s)\n", seconds, cpu_seconds);
}

}  // namespace

void run_network_program(const config& c, const std::string& type, char** argv) {
  // What the options and the data files' headers can tell is told now, not after a compile.
  check_network_data(c);
  const network_text& n = c.network;
  const source_dirs src = find_sources();
  if (std::error_code ec; !fs::is_regular_file(src.prebuilt, ec))
    throw dafuse::error(src.prebuilt.string() +
                        ": expected dafuse-train's prebuilt part, which a network's program "
                        "links, found no such file (build it: ninja apps/dafuse_train/" +
                        prebuilt_name + ", or meson install)");
  std::vector<std::string> compiler = lines_of(DAFUSE_TRAIN_CXX);
  if (const char* cxx = std::getenv("DAFUSE_TRAIN_CXX"); cxx && *cxx) compiler = words_of(cxx);
  if (compiler.empty())
    throw dafuse::error("DAFUSE_TRAIN_CXX: expected a compiler command, found none");
  const std::vector<std::string> flags = lines_of(DAFUSE_TRAIN_CXXFLAGS);
  const std::string source = program_source(n, type, src.app, src.prebuilt);
  std::string key_text = source;
  for (const auto& a : compiler) key_text += "\n" + a;
  for (const auto& a : flags) key_text += "\n" + a;
  for (const auto& a : program_march()) key_text += "\n" + a;
  key_text += "\n" + src.include.string() + "\n" + src.app.string() + "\n" +
              file_stamp(self_path()) + "\n" + file_stamp(src.prebuilt) + "\n" + cpu_identity();
  char key[17];
  std::snprintf(key, sizeof key, "%016llx", static_cast<unsigned long long>(fnv1a(key_text)));

  const fs::path dir = cache_dir();
  prepare_private_folder(dir);
  const std::string stem = "network-" + std::string(key);
  const fs::path program = dir / stem, sum = dir / (stem + ".crc32");
  int fd = -1;
  {
    const network_lock lock(dir / (stem + ".lock"));
    remove_abandoned_files(dir, stem);
    fd = open_cached_program(program, sum);
    if (fd < 0) {
      compile_network(compiler, flags, src, source, dir, stem);
      fd = open_cached_program(program, sum);
      if (fd < 0)
        throw dafuse::error(program.string() + ": the network compiled just now is damaged");
    }
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::fexecve(fd, argv, environ);
  const int error = errno;
  ::close(fd);
  throw dafuse::error(program.string() +
                      ": cannot run the compiled network: " + std::strerror(error));
}

}  // namespace dafuse_train

#endif
