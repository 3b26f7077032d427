# Prints kernels/cuda/common.cuh with each of its #include "kernels/cuda/NAME.cuh" lines replaced
# by that file's text (the files: -v files="PATH ..."), so that the host test can include the
# decoders under one .h name (cc rules take no .cuh). Fails on an include it was not given, and
# unless each given file but common.cuh was inlined exactly once.
BEGIN {
    n = split(files, f, " ")
    for (i = 1; i <= n; i++) {
        b = f[i]
        sub(/.*\//, "", b)
        path[b] = f[i]
    }
}
/^#include "kernels\/cuda\/[a-z_]+\.cuh"/ {
    name = $2
    gsub(/"/, "", name)
    sub(/.*\//, "", name)
    if (!(name in path)) {
        print "inline_cuh.awk: no file given for " name > "/dev/stderr"
        bad = 1
        exit 1
    }
    while ((getline line < path[name]) > 0) print line
    close(path[name])
    done[name]++
    next
}
{ print }
END {
    if (bad) exit 1
    for (b in path)
        if (b != "common.cuh" && done[b] != 1) {
            print "inline_cuh.awk: " b " inlined " done[b] + 0 " times" > "/dev/stderr"
            exit 1
        }
}
