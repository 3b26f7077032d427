#!/usr/bin/env bash
# tools/peer/llama.cpp: build llama.cpp's llama-bench, llama-perplexity and llama-completion,
# the peer Sluice is measured against (issue 14), from the llama.cpp sources vendored in PyPI's
# llama-cpp-python source distribution (PyPI is reachable here; GitHub is not). pip fetches the
# source distribution only (--no-binary for that one package; its build tools come as wheels).
#
#   tools/peer/llama.cpp              build if needed (CPU, -march=native, Release); print the
#                                     folder holding the binaries
#   tools/peer/llama.cpp --cuda       the same with GGML_CUDA (sm_90, the H100) into its own folder;
#                                     build it here, carry the folder to the GPU machine
#                                     (untested so far; -march=native is this CPU's: the
#                                     other CPU must have its instructions, or build there)
#   tools/peer/llama.cpp --print-bin  print the folder if built, else exit 1 (no build)
#   SLUICE_PEER_LLAMA_VERSION=0.3.36  the llama-cpp-python version (0.3.36 vendors llama.cpp
#                                     commit 0c1e570, the one issue 14's table used)
#
# Idempotent: a finished build leaves a stamp naming the version and flags; a second run with the
# same ones only prints the folder. Everything lives under .peer/ (ignored by git). The binaries
# are linked statically against llama/ggml (BUILD_SHARED_LIBS=OFF) so the folder can be copied.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
version="${SLUICE_PEER_LLAMA_VERSION:-0.3.36}"
cuda=0
print_only=0
for a in "$@"; do
    case "$a" in
        --cuda) cuda=1 ;;
        --print-bin) print_only=1 ;;
        -h | --help)
            sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "tools/peer/llama.cpp: unknown argument '$a' (try --help)" >&2
            exit 2
            ;;
    esac
done

flavour=cpu
cmake_flags=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF
             -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF
             -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
if ((cuda)); then
    flavour=cuda
    cmake_flags+=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
                  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
targets=(llama-bench llama-perplexity llama-completion)

peer="$root/.peer"
src="$peer/llama-cpp-python-$version"
build="$peer/build-$version-$flavour"
bin="$build/bin"
stamp="$build/.sluice-stamp"
want_stamp="$version ${cmake_flags[*]} ${targets[*]}"

built() {
    [[ -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" ]] || return 1
    local t
    for t in "${targets[@]}"; do [[ -x "$bin/$t" ]] || return 1; done
}

if ((print_only)); then
    if built; then
        echo "$bin"
        exit 0
    fi
    again="tools/peer/llama.cpp"
    ((cuda)) && again+=" --cuda"
    echo "tools/peer/llama.cpp: llama.cpp ($flavour) is not built; run $again" >&2
    exit 1
fi

if built; then
    echo "$bin"
    exit 0
fi

for c in cmake python3 c++; do
    if ! command -v "$c" >/dev/null 2>&1; then
        echo "tools/peer/llama.cpp: '$c' not found; run tools/setup" >&2
        exit 1
    fi
done

mkdir -p "$peer"
if [[ ! -f "$src/vendor/llama.cpp/CMakeLists.txt" ]]; then
    dl="$peer/download"
    mkdir -p "$dl"
    echo "tools/peer/llama.cpp: downloading llama-cpp-python $version (source) from PyPI" >&2
    python3 -m pip download --quiet --no-binary llama-cpp-python --no-deps -d "$dl" \
        "llama-cpp-python==$version"
    sdist="$(ls "$dl"/llama_cpp_python-"$version".tar.gz 2>/dev/null || true)"
    if [[ -z "$sdist" ]]; then
        echo "tools/peer/llama.cpp: no llama_cpp_python-$version.tar.gz in $dl" >&2
        exit 1
    fi
    rm -rf "$src.partial"
    mkdir -p "$src.partial"
    tar -xzf "$sdist" -C "$src.partial" --strip-components=1
    rm -rf "$src"
    mv "$src.partial" "$src"
fi

jobs="$(nproc 2>/dev/null || echo 2)"
log="$build.log"
echo "tools/peer/llama.cpp: building ${targets[*]} ($flavour, $jobs jobs; log: $log)" >&2
rm -f "$stamp"
if ! { cmake -S "$src/vendor/llama.cpp" -B "$build" "${cmake_flags[@]}" &&
       cmake --build "$build" --config Release -j "$jobs" --target "${targets[@]}"; } \
       >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "tools/peer/llama.cpp: build failed (log: $log)" >&2
    exit 1
fi
echo "$want_stamp" >"$stamp"
built || { echo "tools/peer/llama.cpp: build finished without ${targets[*]} in $bin" >&2; exit 1; }
echo "$bin"
