"""The junk values hostile_table_test gives every numeric flag, by the flag's kind.

Kinds: int, uint (no sign), float, size, list. A flag's other names share its parser, so they
get fewer values; a refusal must quote the values in QUOTED as given (the others may be named
by their range or value).
"""

JUNK = {
    "int": ["", " 7", "7 ", "7x", "0x7", "+7", "7.5", "nan", "\u0667",
            "99999999999999999999999", "-9223372036854775809"],
    "float": ["", " 0.5", "0.5x", "0x1p-1", "+0.5", "nan", "-inf", "1e999", "1,5",
              "99999999999999999999999999999999999999999"],
    "size": ["", " 8M", "8Q", "8 M", "-8M", "0x8M", "8.5M", "nan", "16777216T"],
    "list": ["", "1,,2", "1,", "1 ,2", "-1", "300", "99999999999999999999", "1;2", "a"],
}
# The other names of a flag share its parser: fewer values for them.
ALIAS_JUNK = {"int": ["", "7x"], "float": ["", "0.5x"], "size": ["", "8Q"], "list": ["", "a"]}
ALIASES_OF = {"--n-predict": "-n", "--ctx-size": "-c", "--ctx": "-c", "--batch-size": "-b",
              "--gpu-layers": "-ngl", "--n-gpu-layers": "-ngl", "--threads": "-t",
              "-ncmoe": "--n-cpu-moe", "--parallel": "-np"}


# Values a message must quote as given (the others may be named by their range or value).
QUOTED = (" 7", "7 ", "7x", "0x7", "+7", " 0.5", "0.5 ", "0.5x", " 8M", "8M ", "8Q", "8 M")

# The completeness check: flags of --help that take no number, and each command's --help argv.
NOT_NUMERIC = {"--cache-type-k", "--cache-type-v", "--type", "--placement", "--shape", "--io",
               "--device", "--arch", "--isa", "--sched", "--pre-reload-script", "--tensor"}
HELPS = {"generate": ["generate"], "perplexity": ["perplexity"], "eval": ["eval"],
         "place show": ["place", "show"], "place profile": ["place", "profile"],
         "place solve": ["place", "solve"], "mkmodel": ["mkmodel"], "demo": ["demo"],
         "bench gguf": ["bench", "gguf"], "bench alloc": ["bench", "alloc"],
         "bench copy": ["bench", "copy"], "bench kernels": ["bench", "kernels"],
         "bench decode": ["bench", "decode"], "bench moe": ["bench", "moe"],
         "serve": ["serve"], "requant": ["requant"]}
