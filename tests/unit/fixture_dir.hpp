// Where the test fixtures (tests/fixtures/) are, found at run time: a path compiled into
// the test files would differ between clones, and ccache would compile every file that
// holds it again for each new clone.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace test {

/// The fixture folder: $LUMINAL_FIXTURE_DIR when set (CTest sets it), otherwise the first
/// tests/fixtures found walking up from the test executable's folder, then from the
/// working directory (a build folder inside the clone, as the README's, finds it).
inline const std::filesystem::path& fixture_dir() {
  namespace fs = std::filesystem;
  static const fs::path dir = [] {
    if (const char* env = std::getenv("LUMINAL_FIXTURE_DIR"); env && *env) return fs::path(env);
    std::error_code ec;
    for (fs::path start : {fs::read_symlink("/proc/self/exe", ec).parent_path(), fs::current_path(ec)}) {
      for (fs::path p = start; !p.empty(); p = p.parent_path()) {
        if (fs::exists(p / "tests" / "fixtures" / "grad_fixtures.json", ec)) return p / "tests" / "fixtures";
        if (p == p.root_path()) break;
      }
    }
    throw std::runtime_error(
        "test fixtures not found: set LUMINAL_FIXTURE_DIR to the clone's tests/fixtures folder");
  }();
  return dir;
}

}  // namespace test
