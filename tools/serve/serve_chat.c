/* Chat template families (serve_chat.h). Most families are one of two shapes, kept as tables:
 * "generic" templates wrap every message as A + role + B + content + C; "role" templates give
 * each of system/user/assistant its own prefix and suffix. The few with state across messages
 * (llama2's turns, mistral's [INST] blocks, gemma's system merge) have their own code. */
#include "tools/serve/serve_chat.h"

#include <ctype.h>
#include <string.h>

static const char *const k_names[SL_CHAT_COUNT] = {
    [SL_CHAT_UNKNOWN] = "unknown",
    [SL_CHAT_UNSUPPORTED] = "unsupported",
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
    [SL_CHAT_GEMMA] = "gemma",
    [SL_CHAT_OPENCHAT] = "openchat",
    [SL_CHAT_VICUNA] = "vicuna",
    [SL_CHAT_VICUNA_ORCA] = "vicuna-orca",
    [SL_CHAT_DEEPSEEK] = "deepseek",
    [SL_CHAT_DEEPSEEK2] = "deepseek2",
    [SL_CHAT_DEEPSEEK3] = "deepseek3",
    [SL_CHAT_COMMAND_R] = "command-r",
    [SL_CHAT_LLAMA3] = "llama3",
    [SL_CHAT_CHATGLM3] = "chatglm3",
    [SL_CHAT_CHATGLM4] = "chatglm4",
    [SL_CHAT_GLMEDGE] = "glmedge",
    [SL_CHAT_EXAONE3] = "exaone3",
    [SL_CHAT_GRANITE] = "granite",
    [SL_CHAT_MEGREZ] = "megrez",
    [SL_CHAT_LLAMA4] = "llama4",
};

const char *sl_chat_name(sl_chat_tmpl t)
{
    return (unsigned)t < SL_CHAT_COUNT ? k_names[t] : "unknown";
}

/* deepseek's <｜User｜>, <｜Assistant｜> and <｜end▁of▁sentence｜> (fullwidth bars) */
#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
#define DS_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
static bool has(const char *s, const char *needle) { return strstr(s, needle) != NULL; }

/* The order of the tests is llama.cpp's: earlier telltales win. */
sl_chat_tmpl sl_chat_detect(const char *t)
{
    if (!t || !*t) return SL_CHAT_UNKNOWN;
    for (int i = SL_CHAT_CHATML; i < SL_CHAT_COUNT; i++)
        if (!strcmp(t, k_names[i])) return (sl_chat_tmpl)i;
    if (has(t, "<|im_start|>")) {
        if (has(t, "<|im_sep|>")) return SL_CHAT_PHI4;
        return has(t, "<end_of_utterance>") ? SL_CHAT_UNSUPPORTED /* smolvlm */ : SL_CHAT_CHATML;
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
    if (has(t, "<|assistant|>") && has(t, "<|user|>"))
        return has(t, "</s>") ? SL_CHAT_FALCON3 : SL_CHAT_GLMEDGE;
    if (has(t, "<|{{ item['role'] }}|>") && has(t, "<|begin_of_image|>")) return SL_CHAT_GLMEDGE;
    if (has(t, "<|user|>") && has(t, "<|endoftext|>")) return SL_CHAT_ZEPHYR;
    if (has(t, "bos_token + message['role']")) return SL_CHAT_UNSUPPORTED; /* monarch */
    if (has(t, "<start_of_turn>")) return SL_CHAT_GEMMA;
    if (has(t, "'\\n\\nAssistant: ' + eos_token")) return SL_CHAT_UNSUPPORTED; /* orion */
    if (has(t, "GPT4 Correct ")) return SL_CHAT_OPENCHAT;
    if (has(t, "USER: ") && has(t, "ASSISTANT: "))
        return has(t, "SYSTEM: ") ? SL_CHAT_VICUNA_ORCA : SL_CHAT_VICUNA;
    if (has(t, "### Instruction:") && has(t, "<|EOT|>")) return SL_CHAT_DEEPSEEK;
    if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>")) return SL_CHAT_COMMAND_R;
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return SL_CHAT_LLAMA3;
    if (has(t, "[gMASK]sop")) return SL_CHAT_CHATGLM3;
    if (has(t, "<\xe7\x94\xa8\xe6\x88\xb7>")) return SL_CHAT_UNSUPPORTED; /* minicpm: <用户> */
    if (has(t, "'Assistant: ' + message['content'] + eos_token")) return SL_CHAT_DEEPSEEK2;
    if (has(t, DS_ASSISTANT) && has(t, DS_USER) && has(t, DS_EOS)) return SL_CHAT_DEEPSEEK3;
    if (has(t, "[|system|]") && has(t, "[|assistant|]") && has(t, "[|endofturn|]"))
        return has(t, "[|tool|]") ? SL_CHAT_UNSUPPORTED /* exaone4 */ : SL_CHAT_EXAONE3;
    if (has(t, "rwkv-world") || has(t, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"))
        return SL_CHAT_UNSUPPORTED;
    if (has(t, "<|start_of_role|>")) return SL_CHAT_GRANITE;
    if (has(t, "message['role'] + additional_special_tokens[0] + message['content'] + "
               "additional_special_tokens[1]"))
        return SL_CHAT_UNSUPPORTED; /* gigachat */
    if (has(t, "<|role_start|>")) return SL_CHAT_MEGREZ;
    if (has(t, "<|header_start|>") && has(t, "<|header_end|>")) return SL_CHAT_LLAMA4;
    return SL_CHAT_UNKNOWN;
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
    const char *a, *b, *c;   /* a + role + b + content + c */
    const char *gen;         /* the assistant's turn */
    bool trim;
} generic_fmt;

static const generic_fmt k_generic[] = {
    {SL_CHAT_CHATML, "", "<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n", false},
    {SL_CHAT_PHI3, "", "<|", "|>\n", "<|end|>\n", "<|assistant|>\n", false},
    {SL_CHAT_PHI4, "", "<|im_start|>", "<|im_sep|>", "<|im_end|>",
     "<|im_start|>assistant<|im_sep|>", false},
    {SL_CHAT_FALCON3, "", "<|", "|>\n", "\n", "<|assistant|>\n", false},
    {SL_CHAT_ZEPHYR, "", "<|", "|>\n", "<|endoftext|>\n", "<|assistant|>\n", false},
    {SL_CHAT_LLAMA3, "", "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>",
     "<|start_header_id|>assistant<|end_header_id|>\n\n", true},
    {SL_CHAT_LLAMA4, "", "<|header_start|>", "<|header_end|>\n\n", "<|eot|>",
     "<|header_start|>assistant<|header_end|>\n\n", true},
    {SL_CHAT_CHATGLM3, "[gMASK]sop", "<|", "|>\n ", "", "<|assistant|>", false},
    {SL_CHAT_CHATGLM4, "[gMASK]<sop>", "<|", "|>\n", "", "<|assistant|>\n", false},
    {SL_CHAT_GLMEDGE, "", "<|", "|>\n", "", "<|assistant|>", false},
    {SL_CHAT_GRANITE, "", "<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>\n",
     "<|start_of_role|>assistant<|end_of_role|>\n", false},
    {SL_CHAT_MEGREZ, "", "<|role_start|>", "<|role_end|>", "<|turn_end|>",
     "<|role_start|>assistant<|role_end|>", false},
};

typedef struct role_fmt {
    sl_chat_tmpl t;
    const char *pre[3], *post[3]; /* system, user, assistant; other roles are skipped */
    const char *gen;
    bool trim;
} role_fmt;

#define CMD_R(x) "<|START_OF_TURN_TOKEN|><|" x "_TOKEN|>"

static const role_fmt k_role[] = {
    {SL_CHAT_COMMAND_R, {CMD_R("SYSTEM"), CMD_R("USER"), CMD_R("CHATBOT")},
     {"<|END_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
     CMD_R("CHATBOT"), true},
    {SL_CHAT_DEEPSEEK, {"", "### Instruction:\n", "### Response:\n"}, {"", "\n", "\n<|EOT|>\n"},
     "### Response:\n", false},
    {SL_CHAT_DEEPSEEK2, {"", "User: ", "Assistant: "}, {"\n\n", "\n\n", DS_EOS}, "Assistant:",
     false},
    {SL_CHAT_DEEPSEEK3, {"", DS_USER, DS_ASSISTANT}, {"\n\n", "", DS_EOS}, DS_ASSISTANT, false},
    {SL_CHAT_VICUNA, {"", "USER: ", "ASSISTANT: "}, {"\n\n", "\n", "</s>\n"}, "ASSISTANT:", false},
    {SL_CHAT_VICUNA_ORCA, {"SYSTEM: ", "USER: ", "ASSISTANT: "}, {"\n", "\n", "</s>\n"},
     "ASSISTANT:", false},
    {SL_CHAT_EXAONE3, {"[|system|]", "[|user|]", "[|assistant|]"},
     {"[|endofturn|]\n", "\n", "[|endofturn|]\n"}, "[|assistant|]", true},
    {SL_CHAT_OPENCHAT, {"", "GPT4 Correct User: ", "GPT4 Correct Assistant: "},
     {"<|end_of_turn|>", "<|end_of_turn|>", "<|end_of_turn|>"}, "GPT4 Correct Assistant:", false},
};

static int role_index(const char *role)
{
    return !strcmp(role, "system") ? 0 : !strcmp(role, "user") ? 1
         : !strcmp(role, "assistant") ? 2 : -1;
}

/* llama2 and its variants: [INST] turns, an optional <<SYS>> block, BOS between turns. */
static void apply_llama2(sl_chat_tmpl t, const sl_chat_msg *msgs, size_t n, FILE *out)
{
    const bool sys = t != SL_CHAT_LLAMA2, bos = t == SL_CHAT_LLAMA2_SYS_BOS;
    const bool strip = t == SL_CHAT_LLAMA2_SYS_STRIP;
    bool inside = true; /* the first turn's BOS comes from the tokenizer */
    fputs("[INST] ", out);
    for (size_t i = 0; i < n; i++) {
        const int r = role_index(msgs[i].role);
        if (!inside) {
            inside = true;
            fputs(bos ? "<s>[INST] " : "[INST] ", out);
        }
        if (r == 0) {
            fputs(sys ? "<<SYS>>\n" : "", out);
            put_content(out, &msgs[i], strip);
            fputs(sys ? "\n<</SYS>>\n\n" : "\n", out);
        } else if (r == 1) {
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
            const int r = role_index(msgs[i].role);
            fprintf(out, "%s%s", r == 0 ? "[SYSTEM_PROMPT]" : r == 1 ? "[INST]" : "", sp);
            put_content(out, &msgs[i], false);
            fputs(r == 0 ? "[/SYSTEM_PROMPT]" : r == 1 ? "[/INST]" : "</s>", out);
        }
        return;
    }
    const char *lead = t == SL_CHAT_MISTRAL_V1 ? " " : "";
    const char *trail = t == SL_CHAT_MISTRAL_V3_TEKKEN ? "" : " ";
    bool inside = false;
    for (size_t i = 0; i < n; i++) {
        const int r = role_index(msgs[i].role);
        if (!inside) {
            fprintf(out, "%s[INST]%s", lead, trail);
            inside = true;
        }
        if (r == 0) {
            put_content(out, &msgs[i], false);
            fputs("\n\n", out);
        } else if (r == 1) {
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

/* Whether a trimmed content is empty. */
static bool blank(const sl_chat_msg *m)
{
    for (size_t i = 0; i < m->len; i++)
        if (!isspace((unsigned char)m->content[i])) return false;
    return true;
}

/* gemma: no system role (every pending system message, trimmed, opens the next user turn),
 * and the assistant is "model". */
static void apply_gemma(const sl_chat_msg *msgs, size_t n, bool add_ass, FILE *out)
{
    size_t sys_from = 0; /* pending system messages are among msgs[sys_from, i) */
    bool pending = false;
    for (size_t i = 0; i < n; i++) {
        const int r = role_index(msgs[i].role);
        if (r == 0) {
            pending |= !blank(&msgs[i]);
            continue;
        }
        fprintf(out, "<start_of_turn>%s\n", r == 2 ? "model" : msgs[i].role);
        if (pending && r != 2) {
            for (size_t k = sys_from; k < i; k++)
                if (role_index(msgs[k].role) == 0) put_content(out, &msgs[k], true);
            fputs("\n\n", out);
            pending = false;
        }
        if (!pending) sys_from = i + 1;
        put_content(out, &msgs[i], true);
        fputs("<end_of_turn>\n", out);
    }
    if (add_ass) fputs("<start_of_turn>model\n", out);
}

int sl_chat_apply(sl_chat_tmpl t, const sl_chat_msg *msgs, size_t n, bool add_ass, FILE *out)
{
    for (size_t k = 0; k < sizeof k_generic / sizeof *k_generic; k++) {
        const generic_fmt *g = &k_generic[k];
        if (g->t != t) continue;
        fputs(g->head, out);
        for (size_t i = 0; i < n; i++) {
            fprintf(out, "%s%s%s", g->a, msgs[i].role, g->b);
            put_content(out, &msgs[i], g->trim);
            fputs(g->c, out);
        }
        if (add_ass) fputs(g->gen, out);
        return ferror(out);
    }
    for (size_t k = 0; k < sizeof k_role / sizeof *k_role; k++) {
        const role_fmt *f = &k_role[k];
        if (f->t != t) continue;
        for (size_t i = 0; i < n; i++) {
            const int r = role_index(msgs[i].role);
            if (r < 0 && t == SL_CHAT_OPENCHAT && msgs[i].role[0]) {
                /* openchat names any other role, capitalised */
                fprintf(out, "GPT4 Correct %c%s: ", toupper((unsigned char)msgs[i].role[0]),
                        msgs[i].role + 1);
                put_content(out, &msgs[i], false);
                fputs("<|end_of_turn|>", out);
            }
            if (r < 0) continue;
            fputs(f->pre[r], out);
            put_content(out, &msgs[i], f->trim);
            fputs(f->post[r], out);
        }
        if (add_ass) fputs(f->gen, out);
        return ferror(out);
    }
    switch (t) {
    case SL_CHAT_LLAMA2:
    case SL_CHAT_LLAMA2_SYS:
    case SL_CHAT_LLAMA2_SYS_BOS:
    case SL_CHAT_LLAMA2_SYS_STRIP: apply_llama2(t, msgs, n, out); break;
    case SL_CHAT_GEMMA: apply_gemma(msgs, n, add_ass, out); break;
    case SL_CHAT_MISTRAL_V1:
    case SL_CHAT_MISTRAL_V3:
    case SL_CHAT_MISTRAL_V3_TEKKEN:
    case SL_CHAT_MISTRAL_V7:
    case SL_CHAT_MISTRAL_V7_TEKKEN: apply_mistral(t, msgs, n, out); break;
    default: break; /* unknown and unsupported families have no formatter */
    }
    return ferror(out);
}
