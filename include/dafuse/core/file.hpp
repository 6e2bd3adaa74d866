// SPDX-License-Identifier: Apache-2.0
//! @file core/file.hpp
//! @brief Files in and out: bounded reading of regular files and atomic, durable writing (POSIX).
//!
//! Every reader and writer of dafuse (NPY, NPZ, CSV, checkpoints, traces, plots, dafuse-train's
//! reports) opens its files here, so each rule holds everywhere:
//!
//! - Reading opens without blocking and accepts regular files only: a FIFO without a writer, a
//!   device such as /dev/zero or a directory is refused by name, never waited on or read without
//!   end. The size is known before a byte is read, so a reader compares what a header promises
//!   with the file and reads straight into the values; an allocation larger than the machine's
//!   memory, or one that fails, is an error naming the file and what it was for.
//! - Writing goes to a temporary file of the writer's own beside the target
//!   (`<name>.tmp-<pid>-<n>`, created exclusively, so neither processes nor threads writing the
//!   same path share one), which is flushed to disk, renamed over the target, and the directory
//!   flushed too: a crash at any point leaves the old file or the whole new one. Temporaries of
//!   the same path left by writers that were killed are removed by the next write.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

namespace dafuse::detail {

//! What a file of mode `m` is, for messages: "a FIFO (named pipe)".
inline const char* file_kind(mode_t m) {
  if (S_ISREG(m)) return "a regular file";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

//! Bytes of physical memory (the largest value when the system does not say).
inline std::uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<std::uint64_t>::max();
  return std::uint64_t(pages) * std::uint64_t(page);
}

//! Fails unless `bytes` for `what` could be held in memory at once: more than the machine has can
//! never be read in, and with overcommit the allocation would "succeed" and the reading be killed.
inline void check_fits_in_memory(std::uint64_t bytes,
                                 std::string_view where,
                                 std::string_view what) {
  const std::uint64_t limit = physical_memory_bytes();
  if (bytes > limit)
    fail(where, what,
         "at most this machine's memory (" + std::to_string(limit) + " bytes) to read it in",
         std::to_string(bytes) + " bytes");
}

//! `count` value-initialised elements for `what`: too many for the machine, or an allocation that
//! fails, is an error naming `where` and `what` rather than a bare std::bad_alloc.
template <class T>
std::vector<T> allocate_values(std::size_t count, std::string_view where, std::string_view what) {
  if (count > std::numeric_limits<std::size_t>::max() / sizeof(T))
    fail(where, what, "a size that fits in memory",
         std::to_string(count) + " elements of " + std::to_string(sizeof(T)) + " bytes");
  const std::uint64_t bytes = std::uint64_t(count) * sizeof(T);
  check_fits_in_memory(bytes, where, what);
  try {
    return std::vector<T>(count);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  fail(where, "cannot allocate " + std::to_string(bytes) + " bytes for " + std::string(what) +
                  ": out of memory");
}

//! A regular file open for reading. Opening never blocks (a FIFO without a writer is refused at
//! once) and refuses anything but a regular file, whose size is then known before any read.
class input_file {
 public:
  //! Opens `path`; `where` names it in every message.
  input_file(const std::filesystem::path& path, std::string where) : where_(std::move(where)) {
    // O_NONBLOCK: open() of a FIFO returns at once instead of waiting for a writer forever; it
    // changes nothing for the regular files that are read.
    do {
      fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    } while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) {
      const int err = errno;
      fail(where_, "cannot open for reading: " + os_reason(err));
    }
    struct ::stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      close();
      fail(where_, "cannot determine the file size: " + os_reason(err));
    }
    if (!S_ISREG(st.st_mode)) {
      close();
      if (S_ISDIR(st.st_mode)) fail(where_, "cannot open for reading: it is a directory");
      fail(where_, std::string("cannot read: it is ") + file_kind(st.st_mode) +
                       ", not a regular file (dafuse reads files whose size it can check first)");
    }
    size_ = std::uint64_t(st.st_size);
  }
  ~input_file() { close(); }
  input_file(input_file&& o) noexcept
      : where_(std::move(o.where_)), fd_(std::exchange(o.fd_, -1)), size_(o.size_) {}
  input_file& operator=(input_file&& o) noexcept {
    if (this != &o) {
      close();
      where_ = std::move(o.where_);
      fd_ = std::exchange(o.fd_, -1);
      size_ = o.size_;
    }
    return *this;
  }
  input_file(const input_file&) = delete;
  input_file& operator=(const input_file&) = delete;

  //! The file's size in bytes when it was opened.
  std::uint64_t size() const noexcept { return size_; }
  //! The name used in messages.
  const std::string& where() const noexcept { return where_; }
  //! The open file descriptor (for mmap); owned by this object.
  int native_handle() const noexcept { return fd_; }

  //! Reads exactly `n` bytes at `offset` into `out`. A file that ends first (it shrank after it
  //! was opened) or an I/O error fails naming `what`.
  void read_at(std::uint64_t offset, void* out, std::size_t n, std::string_view what) const {
    auto* p = static_cast<unsigned char*>(out);
    std::size_t done = 0;
    while (done < n) {
      // Linux moves at most 2^31 - 4096 bytes per call; 1 GiB pieces stay below it.
      const std::size_t piece = std::min<std::size_t>(n - done, std::size_t(1) << 30);
      const ssize_t r = ::pread(fd_, p + done, piece, off_t(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        const int err = errno;
        fail(where_, "cannot read " + std::string(what) + ": " + os_reason(err));
      }
      if (r == 0)
        fail(where_, what,
             std::to_string(n) + " bytes at offset " + std::to_string(offset) + " of a file of " +
                 std::to_string(size_),
             "the end of the file after " + std::to_string(done) +
                 " (the file shrank while it was read)");
      done += std::size_t(r);
    }
  }

  //! The `n` bytes at `offset` for `what`, in memory (refused first if the file has fewer).
  std::vector<unsigned char> read_bytes(std::uint64_t offset,
                                        std::uint64_t n,
                                        std::string_view what) const {
    if (offset > size_ || n > size_ - offset)
      fail(where_, what, std::to_string(n) + " bytes at offset " + std::to_string(offset),
           "a file of " + std::to_string(size_) + " bytes (truncated)");
    if (n > std::numeric_limits<std::size_t>::max())
      fail(where_, what, "a size that fits in memory", std::to_string(n) + " bytes");
    std::vector<unsigned char> bytes = allocate_values<unsigned char>(std::size_t(n), where_, what);
    read_at(offset, bytes.data(), bytes.size(), what);
    return bytes;
  }

  //! The whole file in memory, for formats read as a whole (CSV, ZIP directories).
  std::vector<unsigned char> read_all(std::string_view what) const {
    return read_bytes(0, size_, what);
  }

  //! Reads `n` bytes at `offset` in pieces of at most `piece` bytes, calling
  //! `use(bytes, count, first)` for each (`first`: the index of its first byte among the n):
  //! for converting values as they are read, with no copy of the whole file.
  template <class Use>
  void read_in_pieces(std::uint64_t offset, std::size_t n, std::string_view what, Use use) const {
    constexpr std::size_t piece = std::size_t(1) << 16;
    std::vector<unsigned char> buffer(std::min(n, piece));
    for (std::size_t done = 0; done < n;) {
      const std::size_t count = std::min(piece, n - done);
      read_at(offset + done, buffer.data(), count, what);
      use(static_cast<const unsigned char*>(buffer.data()), count, done);
      done += count;
    }
  }

 private:
  void close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  std::string where_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

//! The whole regular file at `path` (see input_file); `where` names it in messages.
inline std::vector<unsigned char> read_file(const std::filesystem::path& path,
                                            const std::string& where) {
  return input_file(path, where).read_all("file");
}

//! If `name` is a temporary that a writer of the file `target` names (`<target>.tmp-<pid>-<n>`,
//! or `<target>.tmp-<pid>` from dafuse 0.1's checkpoints), the writer's process id; otherwise 0.
inline long temporary_owner(std::string_view name, std::string_view target) {
  if (!name.starts_with(target)) return 0;
  std::string_view rest = name.substr(target.size());
  if (!rest.starts_with(".tmp-")) return 0;
  rest.remove_prefix(5);
  const auto digits = [](std::string_view& s, long& value) {
    std::size_t n = 0;
    value = 0;
    while (n < s.size() && s[n] >= '0' && s[n] <= '9' && n < 9) value = value * 10 + (s[n++] - '0');
    s.remove_prefix(n);
    return n > 0;
  };
  long pid = 0, counter = 0;
  if (!digits(rest, pid)) return 0;
  if (rest.empty()) return pid;
  if (!rest.starts_with('-')) return 0;
  rest.remove_prefix(1);
  return digits(rest, counter) && rest.empty() ? pid : 0;
}

//! Removes the temporaries of `path` left by writers that no longer run: their process is gone
//! (kill(pid, 0) finds none) and no one holds the lock a writer keeps on its temporary (which
//! also protects a live writer on another host sharing the directory, or a reused pid).
inline void remove_stale_temporaries(const std::filesystem::path& path) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  const std::string target = path.filename().string();
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const long pid = temporary_owner(name, target);
    if (pid <= 0 || pid == long(::getpid())) continue;  // not a temporary, or this process's own
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // its writer may still run
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct ::stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0)
      ::unlink(it->path().c_str());
    ::close(fd);
  }
}

//! Flushes the directory `dir` to disk, so that a rename in it survives a crash. File systems
//! that cannot flush a directory (EINVAL), or a directory this process may not read, are left.
inline void sync_directory(const std::filesystem::path& dir, const std::string& where) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  int err = 0;
  while (::fsync(fd) != 0) {
    if (errno == EINTR) continue;
    err = errno;
    break;
  }
  ::close(fd);
  if (err != 0 && err != EINVAL && err != ENOTSUP && err != EROFS)
    fail(where, "written, but its directory could not be flushed to disk: " + os_reason(err));
}

//! Writes all of `bytes` to `fd`; returns 0 or the error number.
inline int write_all(int fd, std::span<const unsigned char> bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const std::size_t piece = std::min<std::size_t>(bytes.size() - done, std::size_t(1) << 30);
    const ssize_t w = ::write(fd, bytes.data() + done, piece);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    if (w == 0) return EIO;
    done += std::size_t(w);
  }
  return 0;
}

//! The next number for a temporary's name: unique among this process's writers (threads).
inline unsigned next_temporary_number() {
  static std::atomic<unsigned> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

//! Writes `bytes` to `path` so that readers see the old file or the whole new one, never a part:
//! see the file's comment. On failure the temporary is removed, `path` is as it was, and the
//! error names `path`, the step that failed and the system's reason (a full disk: "No space left
//! on device"). An existing `path` that is a FIFO or a device (/dev/stdout) is written to
//! directly: there is nothing to replace.
inline void write_file_atomically(const std::filesystem::path& path,
                                  std::span<const unsigned char> bytes) {
  const std::string where = path.string();
  struct ::stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) fail(where, "cannot write: it is a directory");
    int fd;
    do {
      fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      const int err = errno;
      fail(where, "cannot open for writing: " + os_reason(err));
    }
    const int err = write_all(fd, bytes);
    ::close(fd);
    if (err != 0) fail(where, "cannot write: " + os_reason(err));
    return;
  }

  remove_stale_temporaries(path);
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    temporary = where + ".tmp-" + std::to_string(::getpid()) + "-" +
                std::to_string(next_temporary_number());
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    const int err = errno;
    // EEXIST: a temporary of a dead process with this pid; take the next number.
    if (fd < 0 && err != EINTR && (err != EEXIST || attempt == 100))
      fail(where, "cannot open " + temporary + " for writing: " + os_reason(err));
  }
  // Held until the temporary is closed: remove_stale_temporaries leaves a locked file alone.
  (void)::flock(fd, LOCK_EX | LOCK_NB);
  const auto abandon = [&](const std::string& what, int err, bool still_open) {
    if (still_open) ::close(fd);
    ::unlink(temporary.c_str());
    fail(where, what + ": " + os_reason(err));
  };
  if (const int err = write_all(fd, bytes); err != 0)
    abandon("cannot write " + temporary, err, true);
  while (::fsync(fd) != 0) {
    const int err = errno;
    if (err != EINTR) abandon("cannot flush " + temporary + " to disk", err, true);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    if (err != EINTR) abandon("cannot close " + temporary, err, false);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int err = errno;
    abandon("cannot rename " + temporary + " to it", err, false);
  }
  sync_directory(path.has_parent_path() ? path.parent_path() : ".", where);
}

//! The same for text.
inline void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  write_file_atomically(
      path, std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(text.data()),
                                           text.size()));
}

}  // namespace dafuse::detail
