#!/usr/bin/env bash
# tools/gpu-test all --dry-run (issue 31): every step of the one GPU call is listed with its cap,
# the caps plus packing fit the budget and the budget the overall timeout of at most 450 s, and
# the carry check reports the tree, bin-gpu.tar.xz and the peer tarball against the 64 MiB limit.
# Runs without a GPU, bin-gpu or the peer tarball (the dry run then says NOT READY, exit 1).
# Then `cpu --dry-run` (the second call's carry).
set -uo pipefail
gt="$1"
fail=0
check() { # check COND_STATUS MESSAGE
    if [[ "$1" == 0 ]]; then echo "ok   $2"; else echo "FAIL $2"; fail=1; fi
}
out="$("$gt" all --dry-run 2>&1)"
rc=$?
echo "$out"
[[ $rc == 0 || $rc == 1 ]]
check $? "dry run exits 0 (ready) or 1 (not ready), not $rc"
for s in doctor ds2-parity mkmodel kernels alloc bench-moe budget decode-budget decode-hybrid decode-gpu decode-launched decode-prof \
    llama-ncmoe llama-gpu tests summary pack; do
    grep -qE "^  $s +[0-9]+  " <<<"$out"
    check $? "step $s listed with a cap"
done
sum=0
while read -r _ cap _; do sum=$((sum + cap)); done < <(grep -E '^  [a-z0-9-]+ +[0-9]+  ' <<<"$out")
line="$(grep '^caps: ' <<<"$out")"
[[ "$line" =~ ^caps:\ ([0-9]+)\ s\ of\ steps\ \+\ ([0-9]+)\ s\ packing\ =\ ([0-9]+)\ s\ \(budget\ ([0-9]+)\ s\)\;\ overall\ timeout\ ([0-9]+)\ s$ ]]
check $? "caps line: $line"
steps="${BASH_REMATCH[1]:-0}" pack="${BASH_REMATCH[2]:-0}" tot="${BASH_REMATCH[3]:-0}"
budget="${BASH_REMATCH[4]:-0}" limit="${BASH_REMATCH[5]:-999}"
((sum == tot && steps + pack == tot))
check $? "the listed caps ($sum s) are the total ($tot s)"
((tot <= budget && budget <= limit && limit <= 450))
check $? "caps $tot s <= budget $budget s <= overall timeout $limit s <= 450 s"
grep -q '^carry (limit 64 MiB = 67108864 bytes):' <<<"$out" &&
    grep -qE '^  total +[0-9]+ bytes' <<<"$out" &&
    grep -qE 'bin-gpu\.tar\.xz(: NOT BUILT| +[0-9]+ bytes)' <<<"$out" &&
    grep -qE 'llama-bench-cuda-sm90.tar.xz(: MISSING| +[0-9]+ bytes)' <<<"$out"
check $? "carry check: tree, bin-gpu.tar.xz, the peer tarball, the total against 64 MiB"
grep -q "command 'tools/gpu-test all bin-gpu \"\$OUT\"', carry \[\"bin-gpu.tar.xz\"" <<<"$out"
check $? "the device tool's command line is printed"
"$gt" all --bogus >/dev/null 2>&1
[[ $? == 2 ]]
check $? "an unknown flag exits 2"
# the cpu call's dry run (issue 28's 16-core compare): its carry (bin-gpu.tar.xz and the CPU
# llama-bench folder, here a --peer folder that does not exist: NOT READY, exit 1)
out="$("$gt" cpu --dry-run --peer /nonexistent-peer 2>&1)"
rc=$?
echo "$out"
((rc == 1)) && grep -q '^dry run: NOT READY' <<<"$out" &&
    grep -q '/nonexistent-peer: MISSING llama-bench' <<<"$out" &&
    grep -qE '^  total +[0-9]+ bytes' <<<"$out" &&
    grep -q "command 'tools/gpu-test cpu bin-gpu \"\$OUT\"', carry \[\"bin-gpu.tar.xz\", \".peer/cpu-peer\"\], timeout_s [0-9]" <<<"$out"
check $? "cpu --dry-run: the carry check, the peer missing (exit $rc), the device tool's call"
exit $fail
