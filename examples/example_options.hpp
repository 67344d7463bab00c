// What every example shares at its edges: options and environment variables read
// strictly (the whole text, a range, the type the value becomes), each problem a one-line
// error naming the option and exit status 2; output files checked before any work; a
// resumed run's settings compared with the checkpoint's.
//
//     examples::command_line args("pinn", argc, argv, usage_text);
//     while (args.next()) {
//       if (args.is("--help") || args.is("-h")) args.help();
//       else if (args.is("--steps")) opt.steps = args.integer(1, 10000000);
//       else if (args.is("--lr")) opt.lr = args.real(0.0, 1.0, examples::interval::open_closed);
//       else args.unknown();
//     }
//     examples::check_environment("pinn");   // LUMINAL_NUM_THREADS (and MPI's variables)
//
// Messages: "pinn: --steps must be an integer from 1 to 10000000, not 'abc'",
// "pinn: --lr must be a number in (0, 1], not 'nan'", "pinn: --lr needs a value".
#pragma once
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <algorithm>
#include <luminal/backends/thread_pool.hpp>
#include <luminal/core/communicator.hpp>
#include <luminal/io/run_settings.hpp>
#include <luminal/io/safetensors.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>
#if defined(LUMINAL_EXAMPLE_MPI)
#include <luminal/distributed/mpi.hpp>
#endif

namespace luminal::examples {

/// The ends of a range of real numbers: "[0, 1]", "(0, 1]".
enum class interval { closed, open_closed };

/// Prints "<program>: <problem>" on one line to standard error and exits with status 2:
/// the usage errors of every example.
[[noreturn]] inline void usage_failure(std::string_view program, std::string_view problem) {
  std::fprintf(stderr, "%.*s: %.*s\n", int(program.size()), program.data(), int(problem.size()), problem.data());
  std::exit(2);
}

/// `text` for a message: at most 60 bytes, cut at a UTF-8 character boundary.
inline std::string in_quotes(std::string_view text) {
  if (text.size() <= 60) return "'" + std::string(text) + "'";
  std::size_t cut = 57;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return "'" + std::string(text.substr(0, cut)) + "...'";
}

/// `text` as an integer in [low, high]: the whole text, decimal, no sign for an unsigned
/// type, no overflow; nothing otherwise.
template <std::integral Int>
bool parse_integer(std::string_view text, Int low, Int high, Int& out) {
  Int value{};
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || stop != end || value < low || value > high) return false;
  out = value;
  return true;
}

/// `text` as a finite real in the interval, checked as the Real it becomes (1e-50 is no
/// positive float); nothing otherwise.
template <std::floating_point Real>
bool parse_real(std::string_view text, Real low, Real high, interval kind, Real& out) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || stop != end || !std::isfinite(value)) return false;
  const Real v = Real(value);
  if (!std::isfinite(v) || (kind == interval::open_closed ? !(v > low) : !(v >= low)) || !(v <= high)) return false;
  out = v;
  return true;
}

/// A program's arguments, read one option at a time; see the file comment.
class command_line {
 public:
  command_line(std::string program, int argc, char** argv, std::string usage)
      : program_(std::move(program)), usage_(std::move(usage)), argc_(argc), argv_(argv) {}

  /// Moves to the next argument; false when none is left.
  bool next() {
    if (at_ + 1 >= argc_) return false;
    option_ = argv_[++at_];
    return true;
  }
  const std::string& option() const { return option_; }
  bool is(std::string_view name) const { return option_ == name; }

  /// The current option's value (the next argument).
  std::string text() {
    if (at_ + 1 >= argc_) fail(option_ + " needs a value");
    return argv_[++at_];
  }
  /// The value as an integer in [low, high].
  template <std::integral Int>
  Int integer(Int low, Int high) {
    const std::string value = text();
    Int out{};
    if (!parse_integer(value, low, high, out))
      fail(option_ + " must be an integer from " + std::to_string(low) + " to " + std::to_string(high) + ", not " +
           in_quotes(value));
    return out;
  }
  /// The value as a finite number in [low, high] (or (low, high]).
  template <std::floating_point Real>
  Real real(Real low, Real high, interval kind = interval::closed) {
    const std::string value = text();
    Real out{};
    if (!parse_real(value, low, high, kind, out)) {
      char range[96];
      std::snprintf(range, sizeof range, "%s%g, %g]", kind == interval::open_closed ? "(" : "[", double(low),
                    double(high));
      fail(option_ + " must be a number in " + range + ", not " + in_quotes(value));
    }
    return out;
  }

  /// Prints "<program>: <problem>" and exits with status 2.
  [[noreturn]] void fail(const std::string& problem) const { usage_failure(program_, problem); }
  /// The current argument is not an option of this program.
  [[noreturn]] void unknown() const { fail("unknown argument " + in_quotes(option_) + " (--help lists the options)"); }
  /// Prints the usage text to standard output and exits with status 0.
  [[noreturn]] void help() const {
    std::fputs(usage_.c_str(), stdout);
    std::exit(0);
  }
  const std::string& program() const { return program_; }

 private:
  std::string program_, usage_;
  int argc_;
  char** argv_;
  int at_ = 0;
  std::string option_;
};

/// Checks the environment variables luminal reads, as the library will read them:
/// LUMINAL_NUM_THREADS (thread_pool::threads_from_text), and in a program built with MPI
/// LUMINAL_MPI_TIMEOUT and LUMINAL_MPI_PROGRESS_THREAD. A bad value is a one-line error
/// naming the variable, exit status 2, before any work.
inline void check_environment(std::string_view program) {
  try {
    if (const char* threads = std::getenv("LUMINAL_NUM_THREADS")) (void)thread_pool::threads_from_text(threads);
#if defined(LUMINAL_EXAMPLE_MPI)
    (void)mpi_timeout_from_environment();
    (void)mpi_communicator::progress_thread_wanted();
#endif
  } catch (const std::exception& e) {
    usage_failure(program, e.what());
  }
}

/// Fails (naming the option `what` and `path`) unless a file can be written at `path`
/// atomically: its directory exists and takes a new file, and `path` is not a directory.
/// Checked before training, so that a bad path is not found after the first epoch.
inline void require_writable(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw std::runtime_error(what + " needs a file name");
  if (fs::is_directory(path, ec)) throw std::runtime_error(what + " '" + path + "' is a directory");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec))
    throw std::runtime_error(what + " '" + path + "': '" + dir.string() + "' is not a directory");
  std::string probe = (dir / ".luminal-write-test-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    const int err = errno;
    throw std::runtime_error(what + " '" + path + "': cannot create files in '" + dir.string() +
                             "': " + std::generic_category().message(err));
  }
  ::close(fd);
  fs::remove(probe, ec);
}

/// A --checkpoint before the run: writable (require_writable), and cleared of the
/// temporary files that saves killed midway left beside it (remove_interrupted_saves), so
/// that neither a failed resume nor a refused one leaves them there.
inline void prepare_checkpoint(const std::string& path) {
  require_writable(path, "--checkpoint");
  (void)remove_interrupted_saves(path);
}

/// Compares the settings of this run with those checkpoint `file` recorded (`metadata`).
/// A setting named in `fixed` (the model's shape) that differs is always refused; any
/// other change is refused unless `allow_changes`, when each is printed as a warning.
/// Throws std::runtime_error naming every change and how to proceed.
template <class Metadata>
void check_resumed_settings(std::string_view program, const run_settings& run, const Metadata& metadata,
                            const std::string& file, const std::vector<std::string>& fixed, bool allow_changes,
                            bool print_warnings = true) {
  const auto changes = run.changes_from(metadata);
  std::string structural, others;
  for (const auto& c : changes) {
    const bool is_fixed = std::find(fixed.begin(), fixed.end(), c.name) != fixed.end();
    (is_fixed ? structural : others) += (std::string((is_fixed ? structural : others).empty() ? "" : "; ")) + run.describe(c);
  }
  if (!structural.empty())
    throw std::runtime_error("checkpoint '" + file + "' holds another model: " + structural +
                             " (resume with the checkpoint's options; the checkpoint is left as it is)");
  if (others.empty()) return;
  if (!allow_changes)
    throw std::runtime_error("checkpoint '" + file + "' was trained with other settings: " + others +
                             " (resume with the same options, or pass --allow-changes to continue with these)");
  if (print_warnings)
    for (const auto& c : changes)
      std::fprintf(stderr, "%.*s: warning: %s (--allow-changes)\n", int(program.size()), program.data(),
                   run.describe(c).c_str());
}

/// Runs `check()` (a check that only some ranks make: rank 0's of its output files) and
/// fails on every rank if it failed on any: with its own message on the rank where it
/// failed, naming that rank on the others, so that no rank waits for one that stopped.
template <class Check>
void on_every_rank(communicator& comm, Check&& check) {
  std::string problem;
  try {
    check();
  } catch (const std::exception& e) {
    if (comm.size() == 1) throw;
    problem = e.what();
  }
  if (comm.size() == 1) return;
  const std::vector<std::string> all = comm.all_gather(problem);
  for (std::size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty())
      throw std::runtime_error(problem.empty() ? "rank " + std::to_string(r) + " stopped: " + all[r] : problem);
}

/// This machine's physical memory in bytes, or 0 where it cannot be asked.
inline std::uint64_t physical_memory_bytes() { return luminal::detail::safetensors::physical_memory_bytes(); }

}  // namespace luminal::examples
