#!/usr/bin/env bash
# tools/peer/llama.cpp: build llama.cpp's llama-bench, llama-perplexity and llama-completion,
# the peer Sluice is measured against (issue 14), from the llama.cpp sources vendored in PyPI's
# llama-cpp-python source distribution (PyPI is reachable here; GitHub is not). pip fetches the
# source distribution only (--no-binary for that one package; its build tools come as wheels).
#
#   tools/peer/llama.cpp              build if needed (CPU, -march=native, Release; without AMX
#                                     where the CPU has it, see below); print the binaries' folder
#   tools/peer/llama.cpp --cuda       llama.cpp's CUDA llama-bench for the GPU machine (issue 31):
#                                     the prebuilt llama-bench-cuda-sm90.tar.xz (same llama.cpp
#                                     0c1e570; sm_90, AVX-512/VNNI/BF16/AMX CPU backend, static)
#                                     from --tarball FILE, $SLUICE_PEER_CUDA_TARBALL or
#                                     ../shared/peer/ beside the checkout, checked against its
#                                     sha256, copied to .peer/ (the one file to carry: 22 MB)
#                                     and unpacked into .peer/cuda/; prints .peer/cuda/bin.
#                                     It has no llama-perplexity. Without the tarball: builds
#                                     from source (below), about an hour on 2 cores
#   tools/peer/llama.cpp --cuda --from-source
#                                     build llama-bench and llama-perplexity with GGML_CUDA for
#                                     sm_90 and the GPU host's CPU (AVX-512 VBMI/VNNI/BF16, AMX;
#                                     not -march=native), linked statically, stripped, packed
#                                     into .peer/llama-cuda-sm90-source.tar.xz (untested on a GPU)
#   tools/peer/llama.cpp --print-bin  print the folder if built, else exit 1 (no build)
#   SLUICE_PEER_LLAMA_VERSION=0.3.36  the llama-cpp-python version (0.3.36 vendors llama.cpp
#                                     commit 0c1e570, the one issue 14's table used)
#   SLUICE_PEER_LLAMA_AMX=0|1         1: build with AMX on a CPU that has it (default 0: without;
#                                     llama.cpp 0c1e570's AMX path dies of SIGILL here, see below)
#
# Idempotent: a finished build leaves a stamp naming the version and flags; a second run with the
# same ones only prints the folder. Everything lives under .peer/ (ignored by git). The binaries
# are linked statically against llama/ggml (BUILD_SHARED_LIBS=OFF) so the folder can be copied.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
version="${SLUICE_PEER_LLAMA_VERSION:-0.3.36}"
cuda=0
print_only=0
from_source=0
tarball_flag=0
tarball="${SLUICE_PEER_CUDA_TARBALL:-}"
while (($#)); do
    a="$1"
    shift
    case "$a" in
        --cuda) cuda=1 ;;
        --from-source) from_source=1 ;;
        --tarball)
            if (($# == 0)) || [[ -z "$1" ]]; then
                echo "tools/peer/llama.cpp: --tarball needs a file" >&2
                exit 2
            fi
            tarball="$1"
            tarball_flag=1
            shift
            ;;
        --print-bin) print_only=1 ;;
        -h | --help)
            sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "tools/peer/llama.cpp: unknown argument '$a' (try --help)" >&2
            exit 2
            ;;
    esac
done
if ((!cuda && (from_source || tarball_flag))); then
    echo "tools/peer/llama.cpp: --from-source and --tarball go with --cuda" >&2
    exit 2
fi
case "${SLUICE_PEER_LLAMA_AMX-0}" in
    0 | 1) ;;
    *)
        echo "tools/peer/llama.cpp: SLUICE_PEER_LLAMA_AMX='$SLUICE_PEER_LLAMA_AMX' is not 0 or 1" >&2
        exit 2
        ;;
esac

# ---- the prebuilt CUDA llama-bench (../shared/peer/README.md) ----------------------------------
# Its name and sha256; a tarball with another sha256 is refused.
cuda_tar_name=llama-bench-cuda-sm90.tar.xz
cuda_tar_sha256=ac1e659b3a8f3ef384bcb62658722f67c3039a8c2b8a41ff9424384298ca525b
peer="$root/.peer"
cuda_dir="$peer/cuda"

# Unpacks .peer/$cuda_tar_name into .peer/cuda once (a stamp names the sha256); prints the bin
# folder. Returns 1 with a message when the tarball is missing, wrong or incomplete.
cuda_prebuilt() {
    local tb="$peer/$cuda_tar_name" sum
    [[ -f "$tb" ]] || return 1
    sum="$(sha256sum "$tb" | cut -d' ' -f1)"
    if [[ "$sum" != "$cuda_tar_sha256" ]]; then
        echo "tools/peer/llama.cpp: $tb: sha256 $sum, expected $cuda_tar_sha256" >&2
        return 1
    fi
    if [[ "$(cat "$cuda_dir/.sluice-stamp" 2>/dev/null)" != "$cuda_tar_sha256" ]]; then
        rm -rf "$cuda_dir.partial"
        mkdir -p "$cuda_dir.partial"
        if ! tar -xJf "$tb" -C "$cuda_dir.partial"; then
            echo "tools/peer/llama.cpp: cannot unpack $tb" >&2
            rm -rf "$cuda_dir.partial"
            return 1
        fi
        echo "$cuda_tar_sha256" >"$cuda_dir.partial/.sluice-stamp"
        rm -rf "$cuda_dir"
        mv "$cuda_dir.partial" "$cuda_dir"
    fi
    if [[ ! -x "$cuda_dir/bin/llama-bench" ]]; then
        echo "tools/peer/llama.cpp: $tb holds no bin/llama-bench" >&2
        return 1
    fi
    echo "$cuda_dir/bin"
}

if ((cuda && !from_source)); then
    if ((print_only)); then
        cuda_prebuilt 2>/dev/null && exit 0
        echo "tools/peer/llama.cpp: the CUDA llama-bench is not in .peer/; run tools/peer/llama.cpp --cuda" >&2
        exit 1
    fi
    # the tarball: --tarball / $SLUICE_PEER_CUDA_TARBALL, else ../shared/peer beside the
    # checkout, else the copy already in .peer/
    src_tb="$tarball"
    [[ -z "$src_tb" && -f "$root/../shared/peer/$cuda_tar_name" ]] && src_tb="$root/../shared/peer/$cuda_tar_name"
    if [[ -n "$src_tb" ]]; then
        if [[ ! -f "$src_tb" ]]; then
            echo "tools/peer/llama.cpp: $src_tb: no such file" >&2
            exit 1
        fi
        sum="$(sha256sum "$src_tb" | cut -d' ' -f1)"
        if [[ "$sum" != "$cuda_tar_sha256" ]]; then
            echo "tools/peer/llama.cpp: $src_tb: sha256 $sum, expected $cuda_tar_sha256 (not the build of ../shared/peer/README.md)" >&2
            exit 1
        fi
        mkdir -p "$peer"
        if ! cmp -s "$src_tb" "$peer/$cuda_tar_name"; then
            cp "$src_tb" "$peer/$cuda_tar_name.partial" && mv "$peer/$cuda_tar_name.partial" "$peer/$cuda_tar_name"
        fi
    fi
    if cuda_prebuilt; then
        echo "tools/peer/llama.cpp: CUDA llama-bench ready (no llama-perplexity in this build); carry .peer/$cuda_tar_name" >&2
        exit 0
    fi
    echo "tools/peer/llama.cpp: no $cuda_tar_name (looked at --tarball, \$SLUICE_PEER_CUDA_TARBALL, $root/../shared/peer, $peer); build from source with --cuda --from-source (about an hour on 2 cores)" >&2
    exit 1
fi

flavour=cpu
cmake_flags=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF
             -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF
             -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
targets=(llama-bench llama-perplexity llama-completion)

# -march=native turns on every ISA extension the CPU advertises, AMX included. llama.cpp
# 0c1e570's AMX matmul dies of SIGILL here (2026-11-29, this 2-core Sapphire Rapids VM:
# tilezero in tinygemm_kernel_amx<block_iq4_xs> on the first prompt test, every test after)
# although the tiles work in a process that asks for them (arch_prctl ARCH_REQ_XCOMP_PERM:
# Sluice's own AMX kernels, a minimal tile program looping 3M times across context switches),
# so a probe of the tiles cannot tell; on a CPU with AMX the peer is built without it (the
# CPU's other extensions named instead of -march=native). SLUICE_PEER_LLAMA_AMX=1 builds it
# with AMX (-march=native) for a machine where llama.cpp's AMX path runs.
if ((!cuda)) && grep -qw amx_tile /proc/cpuinfo && [[ "${SLUICE_PEER_LLAMA_AMX:-0}" != 1 ]]; then
    cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    cmake_flags=("${cmake_flags[@]/-DGGML_NATIVE=ON/-DGGML_NATIVE=OFF}")
    for pair in avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI avx512f:AVX512 \
                avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
        [[ "$cpu_flags" == *" ${pair%%:*} "* ]] && cmake_flags+=("-DGGML_${pair#*:}=ON")
    done
    cmake_flags+=(-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
fi

if ((cuda)); then
    # the GPU host's CPU, not this one: llama.cpp computes --n-cpu-moe's experts with it
    # (the flags of ../shared/peer's BUILD-INFO.txt)
    flavour=cuda
    cmake_flags=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_OPENSSL=OFF
                 -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF
                 -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real
                 -DGGML_CUDA_NCCL=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc
                 -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                 -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON
                 -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON -DGGML_AMX_BF16=ON)
    targets=(llama-bench llama-perplexity)
fi

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
    ((cuda)) && again+=" --cuda --from-source"
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
# a fresh configuration: a cache from other flags or another source folder (a copied build)
# would keep its values or refuse to configure
rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
if ! { cmake -S "$src/vendor/llama.cpp" -B "$build" "${cmake_flags[@]}" &&
       cmake --build "$build" --config Release -j "$jobs" --target "${targets[@]}"; } \
       >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "tools/peer/llama.cpp: build failed (log: $log)" >&2
    exit 1
fi
echo "$want_stamp" >"$stamp"
built || { echo "tools/peer/llama.cpp: build finished without ${targets[*]} in $bin" >&2; exit 1; }
if ((cuda)); then
    # packed like the prebuilt tarball: bin/, lib/ (what ldd resolves outside glibc and the
    # CUDA libraries the GPU machine has), BUILD-INFO.txt; the file to carry
    pack="$peer/pack-cuda"
    rm -rf "$pack"
    mkdir -p "$pack/bin" "$pack/lib"
    for t in "${targets[@]}"; do
        cp "$bin/$t" "$pack/bin/" && strip "$pack/bin/$t"
    done
    ldd "$pack/bin/llama-bench" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
        case "$name" in
            libgomp.so.* | libcudart.so.*) cp -L "$path" "$pack/lib/$name" ;;
        esac
    done
    echo "llama.cpp from llama-cpp-python $version (tools/peer/llama.cpp --cuda --from-source): cmake ${cmake_flags[*]}" >"$pack/BUILD-INFO.txt"
    tar -cJf "$peer/llama-cuda-sm90-source.tar.xz" -C "$pack" bin lib BUILD-INFO.txt
    echo "tools/peer/llama.cpp: packed $peer/llama-cuda-sm90-source.tar.xz ($(du -h "$peer/llama-cuda-sm90-source.tar.xz" | cut -f1)); carry it and unpack it there as tools/gpu-test does with the prebuilt one" >&2
fi
echo "$bin"
