#!/usr/bin/env bash
# Runner of sl_fuzz_target's <name>_regression test: replays the corpus files through the fuzz
# binary (standalone main, or libFuzzer under --config=fuzz; both run each file argument once).
# Usage: fuzz_regression.sh BINARY [CORPUS_FILE...]
set -euo pipefail
bin="$1"
shift
if [[ $# -eq 0 ]]; then
    # No corpus: still exercise the target once, on the empty input.
    empty="${TEST_TMPDIR:-${TMPDIR:-/tmp}}/empty_input"
    : >"$empty"
    set -- "$empty"
fi
exec "$bin" "$@"
