#!/usr/bin/env bash
# Installs the peers of the Llama benchmark, on request (no build or test runs this):
#
#   benchmarks/llama_peers.sh [DIR]          # DIR defaults to build/peers of the source tree
#
# into DIR:
#   bin/llama-bench, bin/llama-tokenize   llama.cpp's tools, built from the llama.cpp sources
#                                         vendored in PyPI's llama-cpp-python source archive
#                                         (static, -DGGML_NATIVE=ON, Release)
#   llama.cpp-version.txt                 llama-cpp-python version and the llama.cpp commit
#   torch-venv/                           a Python environment with CPU PyTorch, transformers,
#                                         gguf, accelerate, numpy, sentencepiece, tokenizers
#
# Every step is skipped when its result is already there, so running it again is cheap.
# Environment: LLAMA_CPP_PYTHON_VERSION pins the source archive (default: the newest);
# JOBS sets the build's parallelism (default 2); PYTHON the interpreter that makes the
# environment (default python3). Uses ccache when it is installed.
#
# Afterwards benchmarks/llama_peers.hpp finds the peers in build/peers, or where
# LUMINAL_LLAMA_PEERS points:  LUMINAL_LLAMA_PEERS=DIR ./build/benchmarks/llama_bench ...
set -euo pipefail

source_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
peers="${1:-$source_root/build/peers}"
jobs="${JOBS:-2}"
python="${PYTHON:-python3}"
mkdir -p "$peers/src" "$peers/bin"
peers="$(cd "$peers" && pwd)"

step() { printf '\n== llama_peers: %s\n' "$*"; }

# ---------------------------------------------------------------- llama.cpp
if [[ -x "$peers/bin/llama-bench" && -x "$peers/bin/llama-tokenize" ]]; then
  step "llama.cpp tools already in $peers/bin ($(tr '\n' ' ' 2>/dev/null <"$peers/llama.cpp-version.txt"))"
else
  archive_pattern="llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION:-*}.tar.gz"
  newest_archive() { find "$peers/src" -maxdepth 1 -name "$archive_pattern" | sort -V | tail -n 1; }
  archive="$(newest_archive)"
  if [[ -z "$archive" ]]; then
    step "downloading the llama-cpp-python source archive into $peers/src"
    spec="llama-cpp-python${LLAMA_CPP_PYTHON_VERSION:+==$LLAMA_CPP_PYTHON_VERSION}"
    "$python" -m pip download --no-deps --no-binary :all: -d "$peers/src" "$spec"
    archive="$(newest_archive)"
    [[ -n "$archive" ]] || { echo "llama_peers: pip saved no $archive_pattern in $peers/src" >&2; exit 1; }
  else
    step "using $archive"
  fi
  unpacked="${archive%.tar.gz}"
  if [[ ! -f "$unpacked/vendor/llama.cpp/CMakeLists.txt" ]]; then
    step "unpacking $(basename "$archive")"
    tar -xzf "$archive" -C "$peers/src"
  fi
  llama_src="$unpacked/vendor/llama.cpp"
  [[ -f "$llama_src/CMakeLists.txt" ]] || { echo "llama_peers: no vendor/llama.cpp in $archive" >&2; exit 1; }

  # The archive has no .git: its CHANGELOG names the llama.cpp commit of each release.
  package_version="$(basename "$unpacked" | sed 's/^llama_cpp_python-//')"
  llama_commit="$(awk -v v="## [$package_version]" '
      index($0, v) == 1 { inside = 1; next }
      inside && /^## \[/ { exit }
      inside && match($0, /llama\.cpp@[0-9a-f]+/) { print substr($0, RSTART + 10, RLENGTH - 10); exit }
    ' "$unpacked/CHANGELOG.md" 2>/dev/null || true)"
  llama_commit="${llama_commit:-unknown}"

  build="$peers/llama.cpp-build"
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  step "configuring llama.cpp $llama_commit (llama-cpp-python $package_version) in $build"
  # GIT_CEILING_DIRECTORIES keeps llama.cpp's build-info from reading the commit of a
  # repository that merely contains DIR (this source tree).
  GIT_CEILING_DIRECTORIES="$peers/src" cmake -S "$llama_src" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_COMMIT="$llama_commit" -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    "${launcher[@]}" >"$build.configure.log" 2>&1 \
    || { tail -n 30 "$build.configure.log" >&2; echo "llama_peers: cmake failed (log: $build.configure.log)" >&2; exit 1; }
  step "building llama-bench and llama-tokenize with -j$jobs (several minutes on 2 cores)"
  cmake --build "$build" --target llama-bench llama-tokenize -j "$jobs"
  for tool in llama-bench llama-tokenize; do
    found="$(find "$build" -type f -name "$tool" -perm -u+x | head -n 1)"
    [[ -n "$found" ]] || { echo "llama_peers: $tool was not built" >&2; exit 1; }
    cp -f "$found" "$peers/bin/$tool"
  done
  printf 'llama-cpp-python %s\nllama.cpp %s\n' "$package_version" "$llama_commit" >"$peers/llama.cpp-version.txt"
  step "installed $peers/bin/llama-bench and $peers/bin/llama-tokenize"
fi

# ---------------------------------------------------------------- PyTorch + transformers
venv="$peers/torch-venv"
modules="torch transformers gguf accelerate numpy sentencepiece tokenizers"
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import ${modules// /, }" 2>/dev/null; then
  step "Python environment already complete: $venv"
else
  if [[ ! -x "$venv/bin/python" ]]; then
    step "creating the Python environment $venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
  fi
  # Plain `torch` from PyPI brings its CUDA libraries too (several GB); the peer runs it on
  # the CPU all the same.
  step "installing $modules into $venv (torch is a large download)"
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install $modules
fi
"$venv/bin/python" -c "from importlib.metadata import version as v; print(' | '.join(m + ' ' + v(m) for m in ('torch', 'transformers', 'gguf', 'tokenizers')))"

step "done. Peers in $peers"
