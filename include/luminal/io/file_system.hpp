// The few file-system operations checkpoints need, on paths held as strings: POSIX calls,
// and <filesystem> only on Windows. Not <filesystem> everywhere: the compiler keeps every
// declaration a translation unit parses until its end, and every program that includes
// train.hpp would carry that large header for a handful of calls.
//
// Paths are std::string; a std::filesystem::path converts to one implicitly on POSIX.
//
//     namespace files = luminal::detail::files;
//     files::status s = files::inspect("ckpt/model.safetensors");
//     if (s.kind == files::entry_kind::regular) std::printf("%llu bytes\n", (unsigned long long)s.size);
//     files::parent_directory("ckpt/model.safetensors");   // "ckpt"
#pragma once
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#if defined(_WIN32)
#include <filesystem>
#else
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace luminal::detail::files {

#if defined(_WIN32)
inline constexpr std::string_view separators = "/\\";
#else
inline constexpr std::string_view separators = "/";
#endif

/// The last component of `path`: "model.safetensors" for "ckpt/model.safetensors".
inline std::string file_name(std::string_view path) {
  const std::size_t slash = path.find_last_of(separators);
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

/// The directory that holds `path`: "ckpt" for "ckpt/model.safetensors", "." for a bare
/// name, "/" for a file in the root.
inline std::string parent_directory(std::string_view path) {
  const std::size_t slash = path.find_last_of(separators);
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return std::string(path.substr(0, 1));
  return std::string(path.substr(0, slash));
}

/// `name` in `directory` (as parent_directory returns it).
inline std::string join(const std::string& directory, std::string_view name) {
  if (directory.empty() || directory == ".") return std::string(name);
  if (separators.find(directory.back()) != std::string_view::npos) return directory + std::string(name);
  return directory + '/' + std::string(name);
}

enum class entry_kind { missing, regular, directory, other };

/// What is at a path, following symbolic links; `error` is the errno of a failed lookup
/// other than "no such file" (then `kind` is `other`).
struct status {
  entry_kind kind = entry_kind::missing;
  std::uint64_t size = 0;
  int error = 0;
};

inline status inspect(const std::string& path) {
#if defined(_WIN32)
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status s = fs::status(path, ec);
  if (!fs::exists(s)) return {};
  if (fs::is_directory(s)) return {entry_kind::directory};
  if (!fs::is_regular_file(s)) return {entry_kind::other};
  const std::uint64_t size = fs::file_size(path, ec);
  return {ec ? entry_kind::other : entry_kind::regular, size, ec ? ec.value() : 0};
#else
  struct ::stat s {};
  if (::stat(path.c_str(), &s) != 0)
    return errno == ENOENT || errno == ENOTDIR ? status{} : status{entry_kind::other, 0, errno};
  if (S_ISDIR(s.st_mode)) return {entry_kind::directory};
  if (!S_ISREG(s.st_mode)) return {entry_kind::other};
  return {entry_kind::regular, std::uint64_t(s.st_size)};
#endif
}

/// Renames `from` over `to`, replacing it atomically where the system can; 0 or an errno.
inline int rename_over(const std::string& from, const std::string& to) {
#if defined(_WIN32)
  std::error_code ec;
  std::filesystem::rename(from, to, ec);
  return ec.value();
#else
  return std::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
#endif
}

/// Removes a file, ignoring failure (for cleaning up after a failed save).
inline void remove_quietly(const std::string& path) { (void)std::remove(path.c_str()); }

#if !defined(_WIN32)
/// Calls `visit(name)` for each entry of `directory` (not "." and ".."); stops quietly at
/// the first error, since its callers are best-effort cleanups.
template <class Visit>
void for_each_entry(const std::string& directory, Visit visit) {
  DIR* dir = ::opendir(directory.c_str());
  if (!dir) return;
  while (const ::dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") visit(name);
  }
  ::closedir(dir);
}

/// Whether `path` is a regular file itself (not a symbolic link to one).
inline bool is_plain_file(const std::string& path) {
  struct ::stat s {};
  return ::lstat(path.c_str(), &s) == 0 && S_ISREG(s.st_mode);
}

/// Makes a rename inside `directory` durable (best effort: not every file system allows it).
inline void sync_directory(const std::string& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}
#endif

}  // namespace luminal::detail::files
