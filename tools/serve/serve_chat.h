/* Chat templates of `sluice serve`: a model's `tokenizer.chat_template` (Jinja source in its
 * GGUF) is recognised by family, as llama.cpp's llm_chat_detect_template does — by telltale
 * substrings, not by running Jinja — and each family is written out by a fixed formatter
 * (llama.cpp's llm_chat_apply_template, byte for byte). The families are every one that
 * llama.cpp 0c1e570 (src/llama-chat.cpp) detects; the enum keeps its order.
 *
 * Contract: no allocation, no state; sl_chat_apply writes to the caller's stream and returns
 * nonzero only when the stream reports an error. Roles are free strings ("system", "user",
 * "assistant", "tool", ...); a role a family does not name is treated as llama.cpp's code
 * treats it (written as another role where its code falls through, else skipped). Contents
 * are bytes with a length (they may contain NUL). */
#ifndef SL_CLI_SERVE_CHAT_H
#define SL_CLI_SERVE_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum sl_chat_tmpl {
    SL_CHAT_UNKNOWN = 0, /* not recognised */
    SL_CHAT_CHATML,
    SL_CHAT_LLAMA2,
    SL_CHAT_LLAMA2_SYS,
    SL_CHAT_LLAMA2_SYS_BOS,
    SL_CHAT_LLAMA2_SYS_STRIP,
    SL_CHAT_MISTRAL_V1,
    SL_CHAT_MISTRAL_V3,
    SL_CHAT_MISTRAL_V3_TEKKEN,
    SL_CHAT_MISTRAL_V7,
    SL_CHAT_MISTRAL_V7_TEKKEN,
    SL_CHAT_PHI3,
    SL_CHAT_PHI4,
    SL_CHAT_FALCON3,
    SL_CHAT_ZEPHYR,
    SL_CHAT_MONARCH,
    SL_CHAT_GEMMA,
    SL_CHAT_ORION,
    SL_CHAT_OPENCHAT,
    SL_CHAT_VICUNA,
    SL_CHAT_VICUNA_ORCA,
    SL_CHAT_DEEPSEEK,
    SL_CHAT_DEEPSEEK2,
    SL_CHAT_DEEPSEEK3,
    SL_CHAT_DEEPSEEK_OCR,
    SL_CHAT_COMMAND_R,
    SL_CHAT_LLAMA3,
    SL_CHAT_CHATGLM3,
    SL_CHAT_CHATGLM4,
    SL_CHAT_GLMEDGE,
    SL_CHAT_MINICPM,
    SL_CHAT_EXAONE3,
    SL_CHAT_EXAONE4,
    SL_CHAT_EXAONE_MOE,
    SL_CHAT_RWKV_WORLD,
    SL_CHAT_GRANITE,
    SL_CHAT_GRANITE_4_0,
    SL_CHAT_GRANITE_4_1,
    SL_CHAT_GIGACHAT,
    SL_CHAT_MEGREZ,
    SL_CHAT_YANDEX,
    SL_CHAT_BAILING,
    SL_CHAT_BAILING_THINK,
    SL_CHAT_BAILING2,
    SL_CHAT_LLAMA4,
    SL_CHAT_SMOLVLM,
    SL_CHAT_DOTS1,
    SL_CHAT_HUNYUAN_MOE,
    SL_CHAT_GPT_OSS,
    SL_CHAT_HUNYUAN_DENSE,
    SL_CHAT_HUNYUAN_VL,
    SL_CHAT_KIMI_K2,
    SL_CHAT_SEED_OSS,
    SL_CHAT_GROK2,
    SL_CHAT_PANGU_EMBED,
    SL_CHAT_SOLAR_OPEN,
    SL_CHAT_COUNT
} sl_chat_tmpl;

typedef struct sl_chat_msg {
    const char *role;      /* NUL-terminated */
    const char *content;
    size_t len;            /* bytes of content */
} sl_chat_msg;

/* The family of a template: a family name ("chatml", "llama3", ...: what --chat-template
 * takes; llama.cpp's names) or Jinja source. NULL or "" gives SL_CHAT_UNKNOWN. */
sl_chat_tmpl sl_chat_detect(const char *tmpl);
/* The family's name ("chatml", ...) or "unknown". */
const char *sl_chat_name(sl_chat_tmpl t);
/* Writes the prompt of n messages in family t (t >= SL_CHAT_CHATML), then with add_ass the
 * opening of the assistant's turn (families whose llama.cpp formatter has none ignore it).
 * Returns ferror(out). */
int sl_chat_apply(sl_chat_tmpl t, const sl_chat_msg *msgs, size_t n, bool add_ass, FILE *out);

#endif
