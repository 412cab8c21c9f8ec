# Shared by scripts/faprobe and scripts/test: install what is missing (Debian packages, only when
# missing), then configure and build incrementally with the "release" CMake preset.
set -euo pipefail
FAPROBE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian packages faprobe builds and tests with (the CUDA toolkit is optional and never installed here).
FAPROBE_PACKAGES=(cmake ninja-build g++ git pkg-config libcli11-dev libfmt-dev libeigen3-dev
                  nlohmann-json3-dev libgtest-dev python3 python3-matplotlib python3-numpy python3-pip)

# What `scripts/test --ci` needs besides: clang with its sanitizer and libFuzzer runtimes and its OpenMP for
# the debug preset (ASan + UBSan, the fuzzers).
FAPROBE_CI_PACKAGES=(clang libclang-rt-dev libomp-dev)

# faprobe_install_missing [PACKAGE...]: FAPROBE_PACKAGES and the given ones, only those not installed.
faprobe_install_missing() {
  local missing=()
  for package in "${FAPROBE_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "faprobe: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# The preset faprobe_build builds and scripts/test tests: "release", or "ci" (scripts/test --ci: warnings as
# errors, -march=x86-64-v2) in build/ci, which leaves a user's build/release alone.
FAPROBE_PRESET="${FAPROBE_PRESET:-release}"
faprobe_build_dir() { echo "$FAPROBE_ROOT/build/$FAPROBE_PRESET"; }  # each preset's binaryDir

# The CuTe oracle test (tests/test_cute_oracle.cpp) compiles NVIDIA CuTe's layout definitions with the host
# compiler. Its headers come from the nvidia-cutlass wheel on PyPI (py3-none-any, a zip), downloaded once into
# build/tools/nvidia-cutlass and its include/ unpacked there (cutlass_library/source/include: cute/ and
# cutlass/), where CMake's FAPROBE_CUTE_INCLUDE_DIR looks. 4.2 is the release the oracle was checked with.
# Without the network the test still builds, and its tests skip with the reason.
FAPROBE_CUTLASS_WHEEL="nvidia-cutlass==4.2.*"

# faprobe_wheel_headers NAME SPEC MARKER PREFIX CONSEQUENCE [PIP ARGS...]: the headers under PREFIX of the PyPI
# wheel SPEC, unpacked (nothing else of the wheel) into build/tools/NAME unless build/tools/NAME/MARKER is there
# already. Without the network, or when the wheel cannot be read, it says so with CONSEQUENCE and returns 0:
# what needs the headers then builds without them and says it.
faprobe_wheel_headers() {
  local name="$1" spec="$2" marker="$3" prefix="$4" consequence="$5"
  shift 5
  local tools="$FAPROBE_ROOT/build/tools/$name"
  [ -f "$tools/$marker" ] && return 0
  echo "faprobe: downloading headers ($spec from PyPI) into build/tools/$name" >&2
  rm -rf "$tools/wheel"
  mkdir -p "$tools/wheel"
  if ! python3 -m pip download --quiet --disable-pip-version-check --retries 2 --timeout 15 --no-deps "$@" \
       --dest "$tools/wheel" "$spec" >&2; then
    echo "faprobe: could not download $spec; $consequence" >&2
    return 0
  fi
  python3 - "$tools" "$prefix" "$tools"/wheel/*.whl <<'PYTHON' >&2 ||
import sys, zipfile
destination, prefix, wheel = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(wheel) as archive:
    headers = [name for name in archive.namelist() if name.startswith(prefix)]
    archive.extractall(destination, headers)
print(f"faprobe: unpacked {len(headers)} header files of {wheel.rsplit('/', 1)[-1]}")
PYTHON
    echo "faprobe: could not unpack $spec; $consequence" >&2
  rm -rf "$tools/wheel"  # only the headers are used
  return 0
}

faprobe_cute_headers() {
  faprobe_wheel_headers nvidia-cutlass "$FAPROBE_CUTLASS_WHEEL" cutlass_library/source/include/cute/tensor.hpp \
    cutlass_library/source/include/ "test_cute_oracle's tests will skip"
}

# cuda.cudnn (kernels/cuda/cudnn.cpp) builds cuDNN's SDPA graph with the cudnn-frontend's C++ API, which is
# header-only. Its headers come from the nvidia-cudnn-frontend wheel on PyPI (include/: cudnn_frontend.h and
# the rest), downloaded once into build/tools/cudnn-frontend and its include/ unpacked there, where CMake's
# FAPROBE_CUDNN_FRONTEND_INCLUDE_DIR looks. The wheel also holds a compiled Python module, so pip is asked for
# the CPython 3.12 x86-64 one, whatever this machine runs: the headers are the same in every wheel of a
# release. 1.32 is the release cuda.cudnn was built with; its support rules read the version of the cuDNN 9
# found at run time. Without the network the build still succeeds, and cuda.cudnn says it was built without
# the cudnn-frontend headers.
FAPROBE_CUDNN_FRONTEND_WHEEL="nvidia-cudnn-frontend==1.32.*"
faprobe_cudnn_frontend_headers() {
  faprobe_wheel_headers cudnn-frontend "$FAPROBE_CUDNN_FRONTEND_WHEEL" include/cudnn_frontend.h include/ \
    "cuda.cudnn will be unsupported" --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64
}

# faprobe_build [cmake --build args]: $FAPROBE_PRESET, configured on first use. FAPROBE_WERROR=ON in the
# environment makes warnings errors; a user's build never fails on a warning, since one that only their
# compiler or CPU gives is not theirs to fix. The build tree follows the setting.
faprobe_build() {
  cd "$FAPROBE_ROOT"
  local werror="${FAPROBE_WERROR:-OFF}"
  [ "$FAPROBE_PRESET" = ci ] && werror=ON
  local cache
  cache="$(faprobe_build_dir)/CMakeCache.txt"
  faprobe_cute_headers
  faprobe_cudnn_frontend_headers
  # Configured again when CuTe's or the cudnn-frontend's headers arrived after the last configure (the test
  # and cuda.cudnn then compile them), and when an earlier configure stopped half way (a cache but no
  # build.ninja: a package was missing).
  if [ ! -f "$cache" ] || [ ! -f "$(faprobe_build_dir)/build.ninja" ] || ! grep -q "^FAPROBE_WERROR:BOOL=$werror\$" "$cache" ||
     { [ -f "$FAPROBE_ROOT/build/tools/nvidia-cutlass/cutlass_library/source/include/cute/tensor.hpp" ] &&
       grep -q '^FAPROBE_CUTE_STATUS:INTERNAL=headers missing$' "$cache"; } ||
     { [ -f "$FAPROBE_ROOT/build/tools/cudnn-frontend/include/cudnn_frontend.h" ] &&
       grep -q '^FAPROBE_CUDNN_FRONTEND_STATUS:INTERNAL=headers missing$' "$cache"; }; then
    cmake --preset "$FAPROBE_PRESET" -DFAPROBE_WERROR="$werror" >&2
  fi
  cmake --build --preset "$FAPROBE_PRESET" -j "$(nproc)" "$@" >&2
}

# In a CUDA build, the static checks of the compiled kernels (tests/test_static_checks.cpp) read them with
# cuobjdump, which runs nvdisasm. Where the toolkit lacks them, both come from PyPI (nvidia-cuda-cuobjdump,
# nvidia-cuda-nvdisasm, of the toolkit's major version) into build/tools/cuda-binary-tools, where the test
# also looks; FAPROBE_CUOBJDUMP names the one to use.
faprobe_cuda_binary_tools() {
  local cache
  cache="$(faprobe_build_dir)/CMakeCache.txt"
  grep -q '^FAPROBE_ENABLE_CUDA:BOOL=ON$' "$cache" 2>/dev/null || return 0
  local nvcc toolkit_bin tools major candidate
  nvcc="$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$cache")"
  toolkit_bin="$(dirname "$nvcc")"
  if [ -x "$toolkit_bin/cuobjdump" ] && [ -x "$toolkit_bin/nvdisasm" ]; then
    export FAPROBE_CUOBJDUMP="$toolkit_bin/cuobjdump"
    return 0
  fi
  tools="$FAPROBE_ROOT/build/tools/cuda-binary-tools"
  if ! compgen -G "$tools/nvidia/*/bin/nvdisasm" >/dev/null; then
    major="$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
    echo "faprobe: installing cuobjdump and nvdisasm $major.x from PyPI into build/tools" >&2
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --upgrade \
      --target "$tools" "nvidia-cuda-cuobjdump==$major.*" "nvidia-cuda-nvdisasm==$major.*" >&2 ||
      echo "faprobe: could not install cuobjdump; test_static_checks will fail" >&2
  fi
  for candidate in "$tools"/nvidia/*/bin/cuobjdump; do
    if [ -x "$candidate" ]; then export FAPROBE_CUOBJDUMP="$candidate"; fi
  done
  return 0
}
