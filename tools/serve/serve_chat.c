/* Chat template families (serve_chat.h). Most families are one of two shapes, kept as tables:
 * "generic" templates wrap every message as A + role + B + content + C; "role" templates give
 * each role class (system, user, assistant, tool, function, any other) its own prefix and
 * suffix. The few with state across messages (llama2's turns, mistral's [INST] blocks, the
 * system merges of gemma and orion) and granite's tool calls have their own code.
 *
 * Every string here is llama.cpp's (src/llama-chat.cpp at 0c1e570); a family's row or function
 * is read against its branch of llm_chat_apply_template. */
#include "tools/serve/serve_chat.h"

#include <ctype.h>
#include <string.h>

static const char *const k_names[SL_CHAT_COUNT] = {
    [SL_CHAT_UNKNOWN] = "unknown",
    [SL_CHAT_CHATML] = "chatml",
    [SL_CHAT_LLAMA2] = "llama2",
    [SL_CHAT_LLAMA2_SYS] = "llama2-sys",
    [SL_CHAT_LLAMA2_SYS_BOS] = "llama2-sys-bos",
    [SL_CHAT_LLAMA2_SYS_STRIP] = "llama2-sys-strip",
    [SL_CHAT_MISTRAL_V1] = "mistral-v1",
    [SL_CHAT_MISTRAL_V3] = "mistral-v3",
    [SL_CHAT_MISTRAL_V3_TEKKEN] = "mistral-v3-tekken",
    [SL_CHAT_MISTRAL_V7] = "mistral-v7",
    [SL_CHAT_MISTRAL_V7_TEKKEN] = "mistral-v7-tekken",
    [SL_CHAT_PHI3] = "phi3",
    [SL_CHAT_PHI4] = "phi4",
    [SL_CHAT_FALCON3] = "falcon3",
    [SL_CHAT_ZEPHYR] = "zephyr",
    [SL_CHAT_MONARCH] = "monarch",
    [SL_CHAT_GEMMA] = "gemma",
    [SL_CHAT_ORION] = "orion",
    [SL_CHAT_OPENCHAT] = "openchat",
    [SL_CHAT_VICUNA] = "vicuna",
    [SL_CHAT_VICUNA_ORCA] = "vicuna-orca",
    [SL_CHAT_DEEPSEEK] = "deepseek",
    [SL_CHAT_DEEPSEEK2] = "deepseek2",
    [SL_CHAT_DEEPSEEK3] = "deepseek3",
    [SL_CHAT_DEEPSEEK_OCR] = "deepseek-ocr",
    [SL_CHAT_COMMAND_R] = "command-r",
    [SL_CHAT_LLAMA3] = "llama3",
    [SL_CHAT_CHATGLM3] = "chatglm3",
    [SL_CHAT_CHATGLM4] = "chatglm4",
    [SL_CHAT_GLMEDGE] = "glmedge",
    [SL_CHAT_MINICPM] = "minicpm",
    [SL_CHAT_EXAONE3] = "exaone3",
    [SL_CHAT_EXAONE4] = "exaone4",
    [SL_CHAT_EXAONE_MOE] = "exaone-moe",
    [SL_CHAT_RWKV_WORLD] = "rwkv-world",
    [SL_CHAT_GRANITE] = "granite",
    [SL_CHAT_GRANITE_4_0] = "granite-4.0",
    [SL_CHAT_GRANITE_4_1] = "granite-4.1",
    [SL_CHAT_GIGACHAT] = "gigachat",
    [SL_CHAT_MEGREZ] = "megrez",
    [SL_CHAT_YANDEX] = "yandex",
    [SL_CHAT_BAILING] = "bailing",
    [SL_CHAT_BAILING_THINK] = "bailing-think",
    [SL_CHAT_BAILING2] = "bailing2",
    [SL_CHAT_LLAMA4] = "llama4",
    [SL_CHAT_SMOLVLM] = "smolvlm",
    [SL_CHAT_DOTS1] = "dots1", /* llama.cpp has no name for it: detected, never named */
    [SL_CHAT_HUNYUAN_MOE] = "hunyuan-moe",
    [SL_CHAT_GPT_OSS] = "gpt-oss",
    [SL_CHAT_HUNYUAN_DENSE] = "hunyuan-dense",
    [SL_CHAT_HUNYUAN_VL] = "hunyuan-vl",
    [SL_CHAT_KIMI_K2] = "kimi-k2",
    [SL_CHAT_SEED_OSS] = "seed_oss",
    [SL_CHAT_GROK2] = "grok-2",
    [SL_CHAT_PANGU_EMBED] = "pangu-embedded",
    [SL_CHAT_SOLAR_OPEN] = "solar-open",
};

const char *sl_chat_name(sl_chat_tmpl t)
{
    return (unsigned)t < SL_CHAT_COUNT ? k_names[t] : "unknown";
}

/* Non-ASCII markers as escapes (split literals: a hex escape would swallow a following hex
 * digit). FW is the fullwidth bar ｜ of deepseek's and hunyuan's tokens, SP SentencePiece's ▁. */
#define FW "\xef\xbd\x9c"
#define SP "\xe2\x96\x81"
#define DS_USER "<" FW "User" FW ">"
#define DS_ASSISTANT "<" FW "Assistant" FW ">"
#define DS_EOS "<" FW "end" SP "of" SP "sentence" FW ">"
#define HY(x) "<" FW "hy_" x FW ">"
#define HY_PLACEHOLDER(d) HY("place" SP "holder" SP "no" SP d)
#define HY_BOS HY("begin" SP "of" SP "sentence")
#define MINICPM_USER "<\xe7\x94\xa8\xe6\x88\xb7>"                     /* <用户> */
#define YANDEX_USER " \xd0\x9f\xd0\xbe\xd0\xbb\xd1\x8c\xd0\xb7\xd0\xbe\xd0\xb2\xd0\xb0\xd1\x82" \
                    "\xd0\xb5\xd0\xbb\xd1\x8c:"                         /* " Пользователь:" */
#define YANDEX_ASSISTANT " \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd" \
                         "\xd1\x82:"                                   /* " Ассистент:" */
#define PANGU(x) "[unused9]" x "\xef\xbc\x9a"                          /* x + fullwidth colon */
#define PANGU_SYSTEM PANGU("\xe7\xb3\xbb\xe7\xbb\x9f")                /* 系统 */
#define PANGU_USER PANGU("\xe7\x94\xa8\xe6\x88\xb7")                  /* 用户 */
#define PANGU_ASSISTANT PANGU("\xe5\x8a\xa9\xe6\x89\x8b")             /* 助手 */
#define PANGU_TOOL PANGU("\xe5\xb7\xa5\xe5\x85\xb7")                  /* 工具 */
#define PANGU_FUNCTION PANGU("\xe6\x96\xb9\xe6\xb3\x95")              /* 方法 */

static bool has(const char *s, const char *needle) { return strstr(s, needle) != NULL; }

/* The order of the tests is llama.cpp's: earlier telltales win. */
sl_chat_tmpl sl_chat_detect(const char *t)
{
    if (!t || !*t) return SL_CHAT_UNKNOWN;
    for (int i = SL_CHAT_CHATML; i < SL_CHAT_COUNT; i++)
        if (i != SL_CHAT_DOTS1 && !strcmp(t, k_names[i])) return (sl_chat_tmpl)i;
    if (has(t, "<|im_start|>")) {
        if (has(t, "<|im_sep|>")) return SL_CHAT_PHI4;
        /* SmolVLM opens with <|im_start|> but is not chatml */
        return has(t, "<end_of_utterance>") ? SL_CHAT_SMOLVLM : SL_CHAT_CHATML;
    }
    if (!strncmp(t, "mistral", 7) || has(t, "[INST]")) {
        if (has(t, "[SYSTEM_PROMPT]")) return SL_CHAT_MISTRAL_V7;
        if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]")) {
            if (has(t, " [INST]")) return SL_CHAT_MISTRAL_V1;
            if (has(t, "\"[INST]\"")) return SL_CHAT_MISTRAL_V3_TEKKEN;
            return SL_CHAT_MISTRAL_V3;
        }
        if (has(t, "content.strip()")) return SL_CHAT_LLAMA2_SYS_STRIP;
        if (has(t, "bos_token + '[INST]")) return SL_CHAT_LLAMA2_SYS_BOS;
        return has(t, "<<SYS>>") ? SL_CHAT_LLAMA2_SYS : SL_CHAT_LLAMA2;
    }
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return SL_CHAT_PHI3;
    if (has(t, "[gMASK]<sop>")) return SL_CHAT_CHATGLM4;
    if (has(t, "<|assistant|>") && has(t, "<|user|>")) {
        if (has(t, "<|tool_declare|>")) return SL_CHAT_EXAONE_MOE;
        return has(t, "</s>") ? SL_CHAT_FALCON3 : SL_CHAT_GLMEDGE;
    }
    if (has(t, "<|{{ item['role'] }}|>") && has(t, "<|begin_of_image|>")) return SL_CHAT_GLMEDGE;
    if (has(t, "<|user|>") && has(t, "<|endoftext|>")) return SL_CHAT_ZEPHYR;
    if (has(t, "bos_token + message['role']")) return SL_CHAT_MONARCH;
    if (has(t, "<start_of_turn>")) return SL_CHAT_GEMMA;
    if (has(t, "'\\n\\nAssistant: ' + eos_token")) return SL_CHAT_ORION;
    if (has(t, "GPT4 Correct ")) return SL_CHAT_OPENCHAT;
    if (has(t, "USER: ") && has(t, "ASSISTANT: "))
        return has(t, "SYSTEM: ") ? SL_CHAT_VICUNA_ORCA : SL_CHAT_VICUNA;
    if (has(t, "### Instruction:") && has(t, "<|EOT|>")) return SL_CHAT_DEEPSEEK;
    if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>")) return SL_CHAT_COMMAND_R;
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return SL_CHAT_LLAMA3;
    if (has(t, "[gMASK]sop")) return SL_CHAT_CHATGLM3;
    if (has(t, MINICPM_USER)) return SL_CHAT_MINICPM;
    if (has(t, "'Assistant: ' + message['content'] + eos_token")) return SL_CHAT_DEEPSEEK2;
    if (has(t, DS_ASSISTANT) && has(t, DS_USER) && has(t, DS_EOS)) return SL_CHAT_DEEPSEEK3;
    if (has(t, "[|system|]") && has(t, "[|assistant|]") && has(t, "[|endofturn|]"))
        return has(t, "[|tool|]") ? SL_CHAT_EXAONE4 : SL_CHAT_EXAONE3;
    if (has(t, "rwkv-world") || has(t, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"))
        return SL_CHAT_RWKV_WORLD;
    if (has(t, "<|start_of_role|>")) {
        if (!has(t, "<tool_call>") && !has(t, "<tools>")) return SL_CHAT_GRANITE;
        return has(t, "g4_default_system_message") ? SL_CHAT_GRANITE_4_0 : SL_CHAT_GRANITE_4_1;
    }
    if (has(t, "message['role'] + additional_special_tokens[0] + message['content'] + "
               "additional_special_tokens[1]"))
        return SL_CHAT_GIGACHAT;
    if (has(t, "<|role_start|>")) return SL_CHAT_MEGREZ;
    if (has(t, YANDEX_ASSISTANT)) return SL_CHAT_YANDEX;
    if (has(t, "<role>ASSISTANT</role>")) {
        if (has(t, "'HUMAN'")) return SL_CHAT_BAILING;
        if (has(t, "\"HUMAN\"") && has(t, "<think>")) return SL_CHAT_BAILING_THINK;
        if (has(t, "<role>HUMAN</role>") && has(t, "<|role_end|>")) return SL_CHAT_BAILING2;
    }
    if (has(t, "<|header_start|>") && has(t, "<|header_end|>")) return SL_CHAT_LLAMA4;
    if (has(t, "<|endofuserprompt|>")) return SL_CHAT_DOTS1;
    if (has(t, "<|extra_0|>") && has(t, "<|extra_4|>")) return SL_CHAT_HUNYUAN_MOE;
    if (has(t, "<|start|>") && has(t, "<|channel|>")) return SL_CHAT_GPT_OSS;
    if (has(t, HY("Assistant")) && has(t, HY_BOS)) return SL_CHAT_HUNYUAN_VL;
    if (has(t, HY("Assistant")) && has(t, HY_PLACEHOLDER("3"))) return SL_CHAT_HUNYUAN_DENSE;
    if (has(t, "<|im_assistant|>assistant<|im_middle|>")) return SL_CHAT_KIMI_K2;
    if (has(t, "<seed:bos>")) return SL_CHAT_SEED_OSS;
    if (has(t, "'Assistant: '  + message['content'] + '<|separator|>")) return SL_CHAT_GROK2;
    if (has(t, PANGU_SYSTEM "[unused10]")) return SL_CHAT_PANGU_EMBED;
    if (has(t, "<|begin|>") && has(t, "<|end|>") && has(t, "<|content|>"))
        return SL_CHAT_SOLAR_OPEN;
    return SL_CHAT_UNKNOWN;
}

/* A message's role class; the role table has a row per class (R_SYSTEM0: a system message
 * that opens the chat, for the families that write it apart). */
enum { R_SYSTEM, R_USER, R_ASSISTANT, R_TOOL, R_FUNCTION, R_OTHER, R_SYSTEM0, R_COUNT };
#define TRIM_ALL ((1u << R_COUNT) - 1)

static int role_class(const char *role)
{
    static const char *const k_class[R_OTHER] = {"system", "user", "assistant", "tool",
                                                 "function"};
    for (int r = 0; r < R_OTHER; r++)
        if (!strcmp(role, k_class[r])) return r;
    return R_OTHER;
}

/* Writes content, without leading and trailing whitespace when trim. */
static void put_content(FILE *out, const sl_chat_msg *m, bool trim)
{
    const char *s = m->content;
    size_t n = m->len;
    while (trim && n && isspace((unsigned char)s[0])) s++, n--;
    while (trim && n && isspace((unsigned char)s[n - 1])) n--;
    fwrite(s, 1, n, out);
}

typedef struct generic_fmt {
    sl_chat_tmpl t;
    const char *head;        /* once, before the first message */
    const char *head_nosys;  /* then unless msgs[0] is a system message (even with none) */
    const char *a, *b, *c;   /* a + role + b + content + c */
    const char *a0;          /* a of the first message, if not a */
    const char *c_assistant; /* c of an assistant message, if not c */
    const char *gen;         /* the assistant's turn */
    unsigned trim;           /* bit r: trim the content of role class r */
    bool role_upper;         /* role upper-cased, "user" as "HUMAN" (bailing) */
} generic_fmt;

#define BAILING2_HEAD "<role>SYSTEM</role>detailed thinking off<|role_end|>"

static const generic_fmt k_generic[] = {
    {.t = SL_CHAT_CHATML, .a = "<|im_start|>", .b = "\n", .c = "<|im_end|>\n",
     .gen = "<|im_start|>assistant\n"},
    {.t = SL_CHAT_PHI3, .a = "<|", .b = "|>\n", .c = "<|end|>\n", .gen = "<|assistant|>\n"},
    {.t = SL_CHAT_PHI4, .a = "<|im_start|>", .b = "<|im_sep|>", .c = "<|im_end|>",
     .gen = "<|im_start|>assistant<|im_sep|>"},
    {.t = SL_CHAT_FALCON3, .a = "<|", .b = "|>\n", .c = "\n", .gen = "<|assistant|>\n"},
    {.t = SL_CHAT_ZEPHYR, .a = "<|", .b = "|>\n", .c = "<|endoftext|>\n",
     .gen = "<|assistant|>\n"},
    /* monarch's BOS is inside the history but the tokenizer gives the first */
    {.t = SL_CHAT_MONARCH, .a = "<s>", .a0 = "", .b = "\n", .c = "</s>\n",
     .gen = "<s>assistant\n"},
    {.t = SL_CHAT_LLAMA3, .a = "<|start_header_id|>", .b = "<|end_header_id|>\n\n",
     .c = "<|eot_id|>", .gen = "<|start_header_id|>assistant<|end_header_id|>\n\n",
     .trim = TRIM_ALL},
    {.t = SL_CHAT_CHATGLM3, .head = "[gMASK]sop", .a = "<|", .b = "|>\n ", .c = "",
     .gen = "<|assistant|>"},
    {.t = SL_CHAT_CHATGLM4, .head = "[gMASK]<sop>", .a = "<|", .b = "|>\n", .c = "",
     .gen = "<|assistant|>\n"},
    {.t = SL_CHAT_GLMEDGE, .a = "<|", .b = "|>\n", .c = "", .gen = "<|assistant|>"},
    {.t = SL_CHAT_MEGREZ, .a = "<|role_start|>", .b = "<|role_end|>", .c = "<|turn_end|>",
     .gen = "<|role_start|>assistant<|role_end|>"},
    {.t = SL_CHAT_BAILING, .a = "<role>", .b = "</role>", .c = "",
     .gen = "<role>ASSISTANT</role>", .role_upper = true},
    {.t = SL_CHAT_BAILING_THINK, .a = "<role>", .b = "</role>", .c = "",
     .gen = "<role>ASSISTANT</role><think>", .role_upper = true},
    {.t = SL_CHAT_BAILING2, .head_nosys = BAILING2_HEAD, .a = "<role>", .b = "</role>",
     .c = "<|role_end|>", .gen = "<role>ASSISTANT</role>", .role_upper = true},
    {.t = SL_CHAT_LLAMA4, .a = "<|header_start|>", .b = "<|header_end|>\n\n", .c = "<|eot|>",
     .gen = "<|header_start|>assistant<|header_end|>\n\n", .trim = TRIM_ALL},
    /* the legacy Harmony format: an assistant message ends the conversation's turn */
    {.t = SL_CHAT_GPT_OSS, .a = "<|start|>", .b = "<|message|>", .c = "<|end|>",
     .c_assistant = "<|return|>", .gen = "<|start|>assistant"},
    {.t = SL_CHAT_SEED_OSS, .a = "<seed:bos>", .b = "\n", .c = "<seed:eos>",
     .gen = "<seed:bos>assistant\n", .trim = 1u << R_ASSISTANT},
    {.t = SL_CHAT_SOLAR_OPEN, .a = "<|begin|>", .b = "<|content|>", .c = "<|end|>",
     .gen = "<|begin|>assistant"},
};

/* A NULL pre means no row: the message takes R_OTHER's, and with none there it is skipped. */
typedef struct role_fmt {
    sl_chat_tmpl t;
    const char *head;        /* once, before the first message */
    const char *head_nosys;  /* then if there is a first message and it is not a system one */
    const char *pre[R_COUNT], *post[R_COUNT];
    const char *last_user;   /* after a user message that ends the chat, add_ass or not */
    const char *gen;         /* the assistant's turn; "" where llama.cpp writes none */
    unsigned trim;           /* bit r: trim the content of role class r */
} role_fmt;

#define CMD_R(x) "<|START_OF_TURN_TOKEN|><|" x "_TOKEN|>"
#define CMD_R_END "<|END_OF_TURN_TOKEN|>"
#define EXAONE_END "[|endofturn|]\n"
#define EXAONE_MOE_END "<|endofturn|>\n"
#define KIMI(x) "<|im_" x "|>" /* <|im_system|>, <|im_user|>, <|im_assistant|> */
#define KIMI_MIDDLE "<|im_middle|>"
#define GIGACHAT_SEP "<|message_sep|>"
#define GROK_END "<|separator|>\n\n"

static const role_fmt k_role[] = {
    {.t = SL_CHAT_OPENCHAT, /* other roles: write_openchat_other */
     .pre = {[R_SYSTEM] = "", [R_USER] = "GPT4 Correct User: ",
             [R_ASSISTANT] = "GPT4 Correct Assistant: "},
     .post = {[R_SYSTEM] = "<|end_of_turn|>", [R_USER] = "<|end_of_turn|>",
              [R_ASSISTANT] = "<|end_of_turn|>"},
     .gen = "GPT4 Correct Assistant:"},
    {.t = SL_CHAT_VICUNA, .pre = {[R_SYSTEM] = "", [R_USER] = "USER: ",
                                  [R_ASSISTANT] = "ASSISTANT: "},
     .post = {[R_SYSTEM] = "\n\n", [R_USER] = "\n", [R_ASSISTANT] = "</s>\n"},
     .gen = "ASSISTANT:"},
    {.t = SL_CHAT_VICUNA_ORCA, .pre = {[R_SYSTEM] = "SYSTEM: ", [R_USER] = "USER: ",
                                       [R_ASSISTANT] = "ASSISTANT: "},
     .post = {[R_SYSTEM] = "\n", [R_USER] = "\n", [R_ASSISTANT] = "</s>\n"},
     .gen = "ASSISTANT:"},
    {.t = SL_CHAT_DEEPSEEK, .pre = {[R_SYSTEM] = "", [R_USER] = "### Instruction:\n",
                                    [R_ASSISTANT] = "### Response:\n"},
     .post = {[R_SYSTEM] = "", [R_USER] = "\n", [R_ASSISTANT] = "\n<|EOT|>\n"},
     .gen = "### Response:\n"},
    {.t = SL_CHAT_DEEPSEEK2, .pre = {[R_SYSTEM] = "", [R_USER] = "User: ",
                                     [R_ASSISTANT] = "Assistant: "},
     .post = {[R_SYSTEM] = "\n\n", [R_USER] = "\n\n", [R_ASSISTANT] = DS_EOS},
     .gen = "Assistant:"},
    {.t = SL_CHAT_DEEPSEEK3, .pre = {[R_SYSTEM] = "", [R_USER] = DS_USER,
                                     [R_ASSISTANT] = DS_ASSISTANT},
     .post = {[R_SYSTEM] = "\n\n", [R_USER] = "", [R_ASSISTANT] = DS_EOS},
     .gen = DS_ASSISTANT},
    /* no template: the contents only (an OCR model's prompt) */
    {.t = SL_CHAT_DEEPSEEK_OCR, .pre = {[R_OTHER] = ""}, .post = {[R_OTHER] = ""}, .gen = ""},
    {.t = SL_CHAT_COMMAND_R, .pre = {[R_SYSTEM] = CMD_R("SYSTEM"), [R_USER] = CMD_R("USER"),
                                     [R_ASSISTANT] = CMD_R("CHATBOT")},
     .post = {[R_SYSTEM] = CMD_R_END, [R_USER] = CMD_R_END, [R_ASSISTANT] = CMD_R_END},
     .gen = CMD_R("CHATBOT"), .trim = TRIM_ALL},
    {.t = SL_CHAT_MINICPM, .pre = {[R_USER] = MINICPM_USER, [R_OTHER] = ""},
     .post = {[R_USER] = "<AI>", [R_OTHER] = ""}, .gen = "", .trim = TRIM_ALL},
    {.t = SL_CHAT_EXAONE3, .pre = {[R_SYSTEM] = "[|system|]", [R_USER] = "[|user|]",
                                   [R_ASSISTANT] = "[|assistant|]"},
     .post = {[R_SYSTEM] = EXAONE_END, [R_USER] = "\n", [R_ASSISTANT] = EXAONE_END},
     .gen = "[|assistant|]", .trim = TRIM_ALL},
    {.t = SL_CHAT_EXAONE4, .pre = {[R_SYSTEM] = "[|system|]", [R_USER] = "[|user|]",
                                   [R_ASSISTANT] = "[|assistant|]", [R_TOOL] = "[|tool|]"},
     .post = {[R_SYSTEM] = EXAONE_END, [R_USER] = "\n", [R_ASSISTANT] = EXAONE_END,
              [R_TOOL] = EXAONE_END},
     .gen = "[|assistant|]", .trim = TRIM_ALL},
    {.t = SL_CHAT_EXAONE_MOE, .pre = {[R_SYSTEM] = "<|system|>\n", [R_USER] = "<|user|>\n",
                                      [R_ASSISTANT] = "<|assistant|>\n",
                                      [R_TOOL] = "<|tool|>\n"},
     .post = {[R_SYSTEM] = EXAONE_MOE_END, [R_USER] = EXAONE_MOE_END,
              [R_ASSISTANT] = EXAONE_MOE_END, [R_TOOL] = EXAONE_MOE_END},
     .gen = "<|assistant|>\n", .trim = TRIM_ALL},
    /* "\n\n" is RWKV's end of turn; the assistant's cue follows a final user message only */
    {.t = SL_CHAT_RWKV_WORLD, .pre = {[R_SYSTEM] = "System: ", [R_USER] = "User: ",
                                      [R_ASSISTANT] = "Assistant: "},
     .post = {[R_SYSTEM] = "\n\n", [R_USER] = "\n\n", [R_ASSISTANT] = "\n\n"},
     .last_user = "Assistant:", .gen = "", .trim = TRIM_ALL},
    /* gigachat, hunyuan-dense, hunyuan-vl: only a system message that opens the chat counts */
    {.t = SL_CHAT_GIGACHAT, .head = "<s>", .pre = {[R_SYSTEM0] = "", [R_USER] = "user<|role_sep|>",
                                                   [R_ASSISTANT] = "assistant<|role_sep|>"},
     .post = {[R_SYSTEM0] = GIGACHAT_SEP,
              [R_USER] = GIGACHAT_SEP "available functions<|role_sep|>[]" GIGACHAT_SEP,
              [R_ASSISTANT] = GIGACHAT_SEP},
     .gen = "assistant<|role_sep|>"},
    {.t = SL_CHAT_YANDEX, .pre = {[R_USER] = YANDEX_USER " ", [R_ASSISTANT] = YANDEX_ASSISTANT " "},
     .post = {[R_USER] = "\n\n", [R_ASSISTANT] = "\n\n"}, .gen = YANDEX_ASSISTANT "[SEP]"},
    /* SmolVLM's <|im_start|> is its BOS, written once */
    {.t = SL_CHAT_SMOLVLM, .head = "<|im_start|>",
     .pre = {[R_SYSTEM] = "", [R_USER] = "User: ", [R_OTHER] = "Assistant: "},
     .post = {[R_SYSTEM] = "\n\n", [R_USER] = "<end_of_utterance>\n",
              [R_OTHER] = "<end_of_utterance>\n"},
     .gen = "Assistant:"},
    {.t = SL_CHAT_DOTS1,
     .pre = {[R_SYSTEM] = "<|system|>", [R_USER] = "<|userprompt|>", [R_OTHER] = "<|response|>"},
     .post = {[R_SYSTEM] = "<|endofsystem|>", [R_USER] = "<|endofuserprompt|>",
              [R_OTHER] = "<|endofresponse|>"},
     .gen = "<|response|>"},
    /* hunyuan-moe: every role but system and assistant is written as the user */
    {.t = SL_CHAT_HUNYUAN_MOE, .pre = {[R_SYSTEM] = "<|startoftext|>", [R_ASSISTANT] = "",
                                       [R_OTHER] = "<|startoftext|>"},
     .post = {[R_SYSTEM] = "<|extra_4|>", [R_ASSISTANT] = "<|eos|>", [R_OTHER] = "<|extra_0|>"},
     .gen = ""},
    {.t = SL_CHAT_HUNYUAN_DENSE,
     .pre = {[R_SYSTEM0] = "", [R_USER] = HY("User"), [R_ASSISTANT] = HY("Assistant")},
     .post = {[R_SYSTEM0] = HY_PLACEHOLDER("3"), [R_USER] = HY("Assistant"),
              [R_ASSISTANT] = HY_PLACEHOLDER("2")},
     .gen = ""},
    {.t = SL_CHAT_HUNYUAN_VL, .head = HY_BOS,
     .pre = {[R_SYSTEM0] = "", [R_USER] = "", [R_ASSISTANT] = ""},
     .post = {[R_SYSTEM0] = HY_PLACEHOLDER("3"), [R_USER] = HY("User"),
              [R_ASSISTANT] = HY("Assistant")},
     .gen = ""},
    /* any other role: its content and the end marker, without a header */
    {.t = SL_CHAT_KIMI_K2, .pre = {[R_SYSTEM] = KIMI("system") "system" KIMI_MIDDLE,
                                   [R_USER] = KIMI("user") "user" KIMI_MIDDLE,
                                   [R_ASSISTANT] = KIMI("assistant") "assistant" KIMI_MIDDLE,
                                   [R_TOOL] = KIMI("system") "tool" KIMI_MIDDLE, [R_OTHER] = ""},
     .post = {[R_SYSTEM] = "<|im_end|>", [R_USER] = "<|im_end|>", [R_ASSISTANT] = "<|im_end|>",
              [R_TOOL] = "<|im_end|>", [R_OTHER] = "<|im_end|>"},
     .gen = KIMI("assistant") "assistant" KIMI_MIDDLE},
    {.t = SL_CHAT_GROK2, .pre = {[R_SYSTEM] = "System: ", [R_USER] = "Human: ",
                                 [R_ASSISTANT] = "Assistant: "},
     .post = {[R_SYSTEM] = GROK_END, [R_USER] = GROK_END, [R_ASSISTANT] = GROK_END},
     .gen = "Assistant:", .trim = 1u << R_SYSTEM | 1u << R_USER},
    {.t = SL_CHAT_PANGU_EMBED, .head_nosys = PANGU_SYSTEM "[unused10]",
     .pre = {[R_SYSTEM] = PANGU_SYSTEM, [R_USER] = PANGU_USER, [R_ASSISTANT] = PANGU_ASSISTANT,
             [R_TOOL] = PANGU_TOOL, [R_FUNCTION] = PANGU_FUNCTION},
     .post = {[R_SYSTEM] = "[unused10]", [R_USER] = "[unused10]", [R_ASSISTANT] = "[unused10]",
              [R_TOOL] = "[unused10]", [R_FUNCTION] = "[unused10]"},
     .gen = PANGU_ASSISTANT},
};

/* The role row for msgs[i], or -1 when the family skips it. */
static int role_row(const role_fmt *f, const sl_chat_msg *msgs, size_t i)
{
    const int r = role_class(msgs[i].role);
    if (r == R_SYSTEM && i == 0 && f->pre[R_SYSTEM0]) return R_SYSTEM0;
    if (f->pre[r]) return r;
    return f->pre[R_OTHER] ? R_OTHER : -1;
}

/* openchat names any other role, capitalised, as llama.cpp's role[0] = toupper(role[0]) */
static void write_openchat_other(FILE *out, const sl_chat_msg *m)
{
    fputs("GPT4 Correct ", out);
    if (m->role[0]) fprintf(out, "%c%s", toupper((unsigned char)m->role[0]), m->role + 1);
    fputs(": ", out);
    put_content(out, m, false);
    fputs("<|end_of_turn|>", out);
}

static void apply_role(const role_fmt *f, const sl_chat_msg *msgs, size_t n, bool add_ass,
                       FILE *out)
{
    fputs(f->head ? f->head : "", out);
    if (f->head_nosys && n && role_class(msgs[0].role) != R_SYSTEM) fputs(f->head_nosys, out);
    for (size_t i = 0; i < n; i++) {
        const int r = role_row(f, msgs, i);
        if (r < 0) {
            if (f->t == SL_CHAT_OPENCHAT) write_openchat_other(out, &msgs[i]);
            continue;
        }
        fputs(f->pre[r], out);
        put_content(out, &msgs[i], f->trim >> r & 1);
        fputs(f->post[r], out);
        if (f->last_user && r == R_USER && i + 1 == n) fputs(f->last_user, out);
    }
    if (add_ass) fputs(f->gen, out);
}

static void apply_generic(const generic_fmt *g, const sl_chat_msg *msgs, size_t n,
                          bool add_ass, FILE *out)
{
    fputs(g->head ? g->head : "", out);
    if (g->head_nosys && (!n || role_class(msgs[0].role) != R_SYSTEM)) fputs(g->head_nosys, out);
    for (size_t i = 0; i < n; i++) {
        const int r = role_class(msgs[i].role);
        fputs(i == 0 && g->a0 ? g->a0 : g->a, out);
        if (!g->role_upper) {
            fputs(msgs[i].role, out);
        } else if (r == R_USER) {
            fputs("HUMAN", out);
        } else {
            for (const char *p = msgs[i].role; *p; p++) fputc(toupper((unsigned char)*p), out);
        }
        fputs(g->b, out);
        put_content(out, &msgs[i], g->trim >> r & 1);
        fputs(r == R_ASSISTANT && g->c_assistant ? g->c_assistant : g->c, out);
    }
    if (add_ass) fputs(g->gen, out);
}

/* granite: generic, but an "assistant_tool_call" message opens with <|tool_call|>; 4.x also
 * names its role "assistant". */
static void apply_granite(sl_chat_tmpl t, const sl_chat_msg *msgs, size_t n, bool add_ass,
                          FILE *out)
{
    for (size_t i = 0; i < n; i++) {
        const bool call = !strcmp(msgs[i].role, "assistant_tool_call");
        fprintf(out, "<|start_of_role|>%s<|end_of_role|>%s",
                call && t != SL_CHAT_GRANITE ? "assistant" : msgs[i].role,
                call ? "<|tool_call|>" : "");
        put_content(out, &msgs[i], false);
        fputs("<|end_of_text|>\n", out);
    }
    if (add_ass) fputs("<|start_of_role|>assistant<|end_of_role|>", out);
}

/* llama2 and its variants: [INST] turns, an optional <<SYS>> block, BOS between turns. */
static void apply_llama2(sl_chat_tmpl t, const sl_chat_msg *msgs, size_t n, FILE *out)
{
    const bool sys = t != SL_CHAT_LLAMA2, bos = t == SL_CHAT_LLAMA2_SYS_BOS;
    const bool strip = t == SL_CHAT_LLAMA2_SYS_STRIP;
    bool inside = true; /* the first turn's BOS comes from the tokenizer */
    fputs("[INST] ", out);
    for (size_t i = 0; i < n; i++) {
        const int r = role_class(msgs[i].role);
        if (!inside) {
            inside = true;
            fputs(bos ? "<s>[INST] " : "[INST] ", out);
        }
        if (r == R_SYSTEM) {
            fputs(sys ? "<<SYS>>\n" : "", out);
            put_content(out, &msgs[i], strip);
            fputs(sys ? "\n<</SYS>>\n\n" : "\n", out);
        } else if (r == R_USER) {
            put_content(out, &msgs[i], strip);
            fputs(" [/INST]", out);
        } else {
            put_content(out, &msgs[i], strip);
            fputs("</s>", out);
            inside = false;
        }
    }
}

static void apply_mistral(sl_chat_tmpl t, const sl_chat_msg *msgs, size_t n, FILE *out)
{
    if (t == SL_CHAT_MISTRAL_V7 || t == SL_CHAT_MISTRAL_V7_TEKKEN) {
        const char *sp = t == SL_CHAT_MISTRAL_V7 ? " " : "";
        for (size_t i = 0; i < n; i++) {
            const int r = role_class(msgs[i].role);
            fprintf(out, "%s%s", r == R_SYSTEM ? "[SYSTEM_PROMPT]" : r == R_USER ? "[INST]" : "",
                    sp);
            put_content(out, &msgs[i], false);
            fputs(r == R_SYSTEM ? "[/SYSTEM_PROMPT]" : r == R_USER ? "[/INST]" : "</s>", out);
        }
        return;
    }
    const char *lead = t == SL_CHAT_MISTRAL_V1 ? " " : "";
    const char *trail = t == SL_CHAT_MISTRAL_V3_TEKKEN ? "" : " ";
    bool inside = false;
    for (size_t i = 0; i < n; i++) {
        const int r = role_class(msgs[i].role);
        if (!inside) {
            fprintf(out, "%s[INST]%s", lead, trail);
            inside = true;
        }
        if (r == R_SYSTEM) {
            put_content(out, &msgs[i], false);
            fputs("\n\n", out);
        } else if (r == R_USER) {
            put_content(out, &msgs[i], false);
            fprintf(out, "%s[/INST]", lead);
        } else {
            fputs(trail, out);
            put_content(out, &msgs[i], t == SL_CHAT_MISTRAL_V3);
            fputs("</s>", out);
            inside = false;
        }
    }
}

/* Whether a content, trimmed when trim, is empty. */
static bool blank(const sl_chat_msg *m, bool trim)
{
    for (size_t i = 0; i < m->len; i++)
        if (!trim || !isspace((unsigned char)m->content[i])) return false;
    return true;
}

/* gemma and orion have no system role: the pending system messages (llama.cpp concatenates
 * them, trimmed for gemma) open the next user turn; gemma's assistant is "model", and orion
 * writes every turn's end itself (no assistant's turn to add). pending: messages
 * msgs[from, i) hold the system ones not yet written. */
static void apply_merged_system(sl_chat_tmpl t, const sl_chat_msg *msgs, size_t n,
                                bool add_ass, FILE *out)
{
    const bool gemma = t == SL_CHAT_GEMMA;
    size_t from = 0;
    bool pending = false;
    for (size_t i = 0; i < n; i++) {
        const int r = role_class(msgs[i].role);
        if (r == R_SYSTEM) {
            pending |= !blank(&msgs[i], gemma);
            continue;
        }
        const char *turn = r == R_ASSISTANT ? "model" : msgs[i].role; /* gemma's */
        if (gemma) fprintf(out, "<start_of_turn>%s\n", turn);
        const bool opens = gemma ? strcmp(turn, "model") != 0 : r == R_USER;
        if (!gemma && opens) fputs("Human: ", out);
        if (pending && opens) {
            for (size_t k = from; k < i; k++)
                if (role_class(msgs[k].role) == R_SYSTEM) put_content(out, &msgs[k], gemma);
            fputs("\n\n", out);
            pending = false;
        }
        if (!pending) from = i + 1;
        put_content(out, &msgs[i], gemma);
        fputs(gemma ? "<end_of_turn>\n" : opens ? "\n\nAssistant: </s>" : "</s>", out);
    }
    if (gemma && add_ass) fputs("<start_of_turn>model\n", out);
}

int sl_chat_apply(sl_chat_tmpl t, const sl_chat_msg *msgs, size_t n, bool add_ass, FILE *out)
{
    for (size_t k = 0; k < sizeof k_generic / sizeof *k_generic; k++)
        if (k_generic[k].t == t) {
            apply_generic(&k_generic[k], msgs, n, add_ass, out);
            return ferror(out);
        }
    for (size_t k = 0; k < sizeof k_role / sizeof *k_role; k++)
        if (k_role[k].t == t) {
            apply_role(&k_role[k], msgs, n, add_ass, out);
            return ferror(out);
        }
    switch (t) {
    case SL_CHAT_LLAMA2:
    case SL_CHAT_LLAMA2_SYS:
    case SL_CHAT_LLAMA2_SYS_BOS:
    case SL_CHAT_LLAMA2_SYS_STRIP: apply_llama2(t, msgs, n, out); break;
    case SL_CHAT_MISTRAL_V1:
    case SL_CHAT_MISTRAL_V3:
    case SL_CHAT_MISTRAL_V3_TEKKEN:
    case SL_CHAT_MISTRAL_V7:
    case SL_CHAT_MISTRAL_V7_TEKKEN: apply_mistral(t, msgs, n, out); break;
    case SL_CHAT_GEMMA:
    case SL_CHAT_ORION: apply_merged_system(t, msgs, n, add_ass, out); break;
    case SL_CHAT_GRANITE:
    case SL_CHAT_GRANITE_4_0:
    case SL_CHAT_GRANITE_4_1: apply_granite(t, msgs, n, add_ass, out); break;
    default: break; /* SL_CHAT_UNKNOWN has no formatter */
    }
    return ferror(out);
}
