// Atomic file replacement for save_safetensors (io/safetensors.hpp): the new content goes
// to a temporary file beside the target, which is synced and renamed over it.
//
// A process killed during a save leaves its temporary file behind; the next save to the
// same target removes such leftovers: files named "<target>.tmp-<pid>-<n>" whose process
// <pid> no longer runs (so a concurrent save by a live process is never disturbed).
// Temporary names stay within NAME_MAX: the target's name is shortened in them when
// needed, so that a 255-byte target name still saves.
//
//     luminal::detail::safetensors::temp_file out("ckpt/model.safetensors");
//     out.write(bytes.data(), bytes.size());
//     out.commit();   // renamed over ckpt/model.safetensors; removed instead if not reached
#pragma once
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <string>
#include <string_view>

#include "file_system.hpp"
#include "safetensors_json.hpp"

#if defined(_WIN32)
#include <process.h>
#else
#include <signal.h>
#include <unistd.h>
#endif

namespace luminal::detail::safetensors {

/// The longest file name (one path component) that POSIX file systems commonly allow.
inline constexpr std::size_t name_max = 255;
/// ".tmp-" + pid (at most 10 digits) + "-" + counter (at most 20 digits).
inline constexpr std::size_t temp_suffix_max = 5 + 10 + 1 + 20;

/// The start of the temporary names for `target`: its file name, cut (at a UTF-8
/// character boundary) so that the whole temporary name fits in name_max, then ".tmp-".
inline std::string temp_prefix(const std::string& target) {
  std::string name = files::file_name(target);
  std::size_t keep = std::min(name.size(), name_max - temp_suffix_max);
  while (keep > 0 && keep < name.size() && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80) --keep;
  name.resize(keep);
  return name + ".tmp-";
}

inline long current_pid() {
#if defined(_WIN32)
  return long(_getpid());
#else
  return long(::getpid());
#endif
}

/// The pid in a temporary name "<prefix><pid>-<n>", or -1 if `name` is not one.
inline long temp_file_pid(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return -1;
  name.remove_prefix(prefix.size());
  const std::size_t dash = name.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash > 10 || dash + 1 == name.size()) return -1;
  long pid = 0;
  for (std::size_t k = 0; k < name.size(); ++k) {
    const char c = name[k];
    if (k == dash) continue;
    if (c < '0' || c > '9') return -1;
    if (k < dash) pid = pid * 10 + (c - '0');
  }
  return pid <= 0x7FFFFFFF ? pid : -1;
}

/// Removes the temporary files that killed saves to `target` left behind (best effort:
/// errors are ignored, a save never fails because of them) and returns how many it
/// removed. Not on Windows, which has no cheap test of whether a process runs.
inline std::size_t remove_stale_temp_files(const std::string& target) {
  std::size_t removed = 0;
#if !defined(_WIN32)
  const std::string prefix = temp_prefix(target);
  const std::string dir = files::parent_directory(target);
  files::for_each_entry(dir, [&](std::string_view name) {
    const long pid = temp_file_pid(name, prefix);
    if (pid <= 0 || pid == current_pid()) return;
    if (::kill(pid_t(pid), 0) == 0 || errno == EPERM) return;  // that process still runs
    const std::string path = files::join(dir, name);
    if (files::is_plain_file(path)) {
      files::remove_quietly(path);
      removed += !files::is_plain_file(path);
    }
  });
#else
  (void)target;
#endif
  return removed;
}

/// Closes a FILE* on scope exit.
struct file_closer {
  std::FILE* file = nullptr;
  ~file_closer() {
    if (file) std::fclose(file);
  }
};

/// A temporary file next to the target that is removed unless commit() renamed it.
class temp_file {
 public:
  explicit temp_file(const std::string& target) : target_(target) {
    static std::atomic<unsigned long> counter{0};
    remove_stale_temp_files(target);
    const std::string dir = files::parent_directory(target);
    const std::string prefix = temp_prefix(target);
    for (int attempt = 0; attempt < 64; ++attempt) {
      path_ = files::join(dir, prefix + std::to_string(current_pid()) + "-" + std::to_string(counter.fetch_add(1)));
      errno = 0;
      file_ = std::fopen(path_.c_str(), "wbx");  // "x": fail if it exists
      if (file_) return;
      if (errno != EEXIST) {
        const int err = errno;
        fail(target, "cannot create the temporary file '" + path_ + "': " + errno_text(err));
      }
    }
    fail(target, "cannot create a temporary file next to it (all names taken)");
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  ~temp_file() {
    if (file_) std::fclose(file_);
    if (!committed_) files::remove_quietly(path_);
  }

  void write(const void* data, std::size_t bytes) {
    if (bytes && std::fwrite(data, 1, bytes, file_) != bytes) {
      const int err = errno;
      fail(target_, "writing '" + path_ + "' failed: " + errno_text(err));
    }
  }

  /// Flushes, syncs and closes the temporary file, then renames it over the target.
  void commit() {
    if (std::fflush(file_) != 0) {
      const int err = errno;
      fail(target_, "writing '" + path_ + "' failed: " + errno_text(err));
    }
#if !defined(_WIN32)
    if (::fsync(::fileno(file_)) != 0) {
      const int err = errno;
      fail(target_, "fsync of '" + path_ + "' failed: " + errno_text(err));
    }
#endif
    std::FILE* f = file_;
    file_ = nullptr;
    if (std::fclose(f) != 0) {
      const int err = errno;
      fail(target_, "closing '" + path_ + "' failed: " + errno_text(err));
    }
    if (const int err = files::rename_over(path_, target_))
      fail(target_, "cannot replace it with the new file: " + errno_text(err));
    committed_ = true;
#if !defined(_WIN32)
    files::sync_directory(files::parent_directory(target_));
#endif
  }

 private:
  std::string target_;
  std::string path_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

}  // namespace luminal::detail::safetensors
