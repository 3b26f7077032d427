#!/usr/bin/env bash
# Runner of sl_py_test (//bazel:defs.bzl): runs `python3 SCRIPT ARGS...` with the caller's
# python3 (pyenv; Bazel passes PATH and HOME through --test_env, see .bazelrc).
# Paths in ARGS are runfiles-relative ($(rootpath ...)); the test's cwd is the runfiles root.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
if ! command -v python3 >/dev/null 2>&1; then
    echo "run_py.sh: python3 not found on PATH=$PATH" >&2
    exit 1
fi
exec python3 "$@"
