# Prints a kernels/cuda .cuh (the file argument) with each of its #include "kernels/cuda/NAME.cuh"
# lines replaced by that file's text, recursively (the files: -v files="PATH ..."), so that a
# host test can include the decoders and kernels under one .h name (cc rules take no .cuh).
# A file included again (gemv_multi.cuh includes common.cuh and gemv.cuh, which includes it
# too) is not repeated: its include guard would make it empty. Fails on an include it was not
# given, and unless each given file but the printed one was inlined.
function emit(line,    name, l) {
    if (line !~ /^#include "kernels\/cuda\/[a-z_]+\.cuh"/) {
        print line
        return
    }
    name = line
    sub(/^#include "/, "", name)
    sub(/".*/, "", name)
    sub(/.*\//, "", name)
    if (!(name in path)) {
        print "inline_cuh.awk: no file given for " name > "/dev/stderr"
        bad = 1
        exit 1
    }
    if (name in done) {
        print "/* " name " (inlined above) */"
        return
    }
    done[name]++
    while ((getline l < path[name]) > 0) emit(l)
    close(path[name])
}
BEGIN {
    n = split(files, f, " ")
    for (i = 1; i <= n; i++) {
        b = f[i]
        sub(/.*\//, "", b)
        path[b] = f[i]
    }
}
FNR == 1 {
    main = FILENAME
    sub(/.*\//, "", main)
}
{ emit($0) }
END {
    if (bad) exit 1
    for (b in path)
        if (b != main && done[b] != 1) {
            print "inline_cuh.awk: " b " inlined " done[b] + 0 " times" > "/dev/stderr"
            exit 1
        }
}
