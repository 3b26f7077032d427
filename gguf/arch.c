/* gguf/arch: the architectures' one name list (arch.h). */
#include "gguf/arch.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    const char *also; /* files of another model family that use this name, or NULL */
} k_arch[SL_ARCH_COUNT] = {
    [SL_ARCH_LLAMA] = {"llama", "Mixtral"},
    [SL_ARCH_QWEN2MOE] = {"qwen2moe", NULL},
    [SL_ARCH_QWEN3MOE] = {"qwen3moe", NULL},
    [SL_ARCH_OLMOE] = {"olmoe", NULL},
    [SL_ARCH_GEMMA3] = {"gemma3", NULL},
    [SL_ARCH_GPT_OSS] = {"gpt-oss", NULL},
    [SL_ARCH_DEEPSEEK2] = {"deepseek2", "Kimi-K2"},
    [SL_ARCH_QWEN2] = {"qwen2", NULL},
    [SL_ARCH_QWEN3] = {"qwen3", NULL},
    [SL_ARCH_GEMMA2] = {"gemma2", NULL},
    [SL_ARCH_GRANITE] = {"granite", NULL},
    [SL_ARCH_PHI3] = {"phi3", NULL},
    [SL_ARCH_QWEN3NEXT] = {"qwen3next", NULL},
    [SL_ARCH_GLM4MOE] = {"glm4moe", "Solar Open"},
    [SL_ARCH_QWEN35] = {"qwen35", NULL},
    [SL_ARCH_QWEN35MOE] = {"qwen35moe", NULL},
    [SL_ARCH_MINIMAX_M2] = {"minimax-m2", NULL},
    [SL_ARCH_DOTS1] = {"dots1", NULL},
    [SL_ARCH_BAILINGMOE2] = {"bailingmoe2", "Ling / Ring 2.0"},
    [SL_ARCH_QWEN3VL] = {"qwen3vl", NULL},
    [SL_ARCH_QWEN3VLMOE] = {"qwen3vlmoe", NULL},
    [SL_ARCH_ERNIE4_5] = {"ernie4_5", NULL},
    [SL_ARCH_ERNIE4_5_MOE] = {"ernie4_5-moe", NULL},
    [SL_ARCH_HUNYUAN_MOE] = {"hunyuan-moe", NULL},
};

const char *sl_arch_name(sl_arch a)
{
    return (unsigned)a < SL_ARCH_COUNT ? k_arch[a].name : NULL;
}

sl_status sl_arch_parse(const char *name, sl_arch *out, sl_error *err)
{
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "sl_arch_parse: NULL argument");
    for (int a = 0; name && a < SL_ARCH_COUNT; a++)
        if (!strcmp(name, k_arch[a].name)) {
            *out = (sl_arch)a;
            return SL_OK;
        }
    char list[512];
    size_t len = 0;
    list[0] = '\0';
    for (int a = 0; a < SL_ARCH_COUNT && len < sizeof list; a++) {
        const int k = snprintf(list + len, sizeof list - len, "%s%s%s%s%s", a ? ", " : "",
                               k_arch[a].name, k_arch[a].also ? " (incl. " : "",
                               k_arch[a].also ? k_arch[a].also : "", k_arch[a].also ? ")" : "");
        if (k < 0) break;
        len += (size_t)k;
    }
    return sl_error_set(err, SL_ERR_UNSUPPORTED,
                        "general.architecture '%s': unsupported (supported: %s)",
                        name ? name : "(null)", list);
}
