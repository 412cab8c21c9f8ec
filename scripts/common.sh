# Shared by scripts/faprobe and scripts/test: install what is missing (Debian packages, only when
# missing), then configure and build incrementally with the "release" CMake preset.
set -euo pipefail
FAPROBE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian packages faprobe builds and tests with (the CUDA toolkit is optional and never installed here).
FAPROBE_PACKAGES=(cmake ninja-build g++ git pkg-config libcli11-dev libfmt-dev libeigen3-dev
                  nlohmann-json3-dev libgtest-dev python3 python3-matplotlib python3-numpy)

faprobe_install_missing() {
  local missing=()
  for package in "${FAPROBE_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "faprobe: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

faprobe_build() {
  cd "$FAPROBE_ROOT"
  if [ ! -f build/release/CMakeCache.txt ]; then
    cmake --preset release >&2
  fi
  cmake --build --preset release -j "$(nproc)" "$@" >&2
}
