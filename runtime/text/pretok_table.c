/* The BPE pre-tokenizers by tokenizer.ggml.pre name: the one table of names, what each splits
 * by, and the llama.cpp vocabulary flags that come with the name (llama_vocab::impl::load).
 *
 * A row runs either a hand-written splitter (pretok.c: llama.cpp's custom gpt2 / llama3 code
 * and the o200k regex) or a list of regexes applied in turn (regex.c), each as Hugging Face's
 * Split(regex, "isolated") over every piece of the one before. The regexes are the models'
 * tokenizer.json patterns (where llama.cpp rewrites one for std::regex, e.g. (?i:'s|...) as
 * '[sS]|..., the original is kept: it is the definition llama.cpp's tests check against).
 * Names llama.cpp knows that are absent here are refused with a clear error: a different
 * byte encoding (gemma4, sarvam-moe, whitespace), separator tokens (embedding models),
 * zero-width splits (superbpe, tiny_aya) and custom digit grouping (afmoe). */
#include <stdlib.h>
#include <string.h>

#include "runtime/text/vocab_impl.h"

/* clang-format off */
/* \s?[A-Za-z...]: the letters of DeepSeek LLM's tokenizer.json */
#define DEEPSEEK_LLM_LETTERS \
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293" \
    "\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C" \
    "\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-" \
    "\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A" \
    "\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D" \
    "\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3" \
    "\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115" \
    "\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-" \
    "\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-" \
    "\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06" \
    "\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3" \
    "\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF" \
    "\U0001E900-\U0001E943]+"
#define CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define TAIL_RE "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define NOT_HAN "&&[^\\p{Han}]]"
#define CJK_HANGUL "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"
#define CJK_KANA "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+"
#define FINNISH " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+"

static const char *const k_deepseek_llm[] = {
    "[\\r\\n]", DEEPSEEK_LLM_LETTERS,
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+", "\\s+$", CJK_HANGUL,
    "\\p{N}+", NULL};
static const char *const k_deepseek_coder[] = {
    "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_HANGUL, "\\p{N}", NULL};
static const char *const k_deepseek_v3[] = {
    "\\p{N}{1,3}", CJK_KANA,
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?"
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*" TAIL_RE, NULL};
static const char *const k_spark2_5[] = {
    "\\p{N}{1,3}", CJK_KANA,
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?"
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\\r\\n]|\\s+(?!\\S)|\\s+", "\\p{N}", NULL};
static const char *const k_youtu[] = {
    "[\uAC00-\uD7A3\u3131-\u318E]+|[\uFF01\u2026\u201C\u201D\u2018\u2019\u2014\uFF1A\uFF1B\uFF0C"
    "\u3001-\u303F\uFE30-\uFE4F]+|[\u3105-\u312F]+|" CJK_KANA,
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+" CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+"
    LOWER "*" CONTRACTIONS "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*" TAIL_RE, NULL};
static const char *const k_falcon[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]", NULL};
static const char *const k_starcoder[] = {"\\p{N}", GPT2_RE, NULL};
static const char *const k_qwen35[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*" TAIL_RE, NULL};
static const char *const k_bloom[] = {FINNISH, NULL};
static const char *const k_viking[] = {FINNISH, "\\p{N}", NULL};
static const char *const k_jais2[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)"
    "|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}", NULL};
static const char *const k_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+" LOWER "*"
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*" TAIL_RE, NULL};
static const char *const k_kimi_k2[] = {
    "[\\p{Han}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}" NOT_HAN "*"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}" NOT_HAN "+" CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?"
    "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}" NOT_HAN "+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}" NOT_HAN "*"
    CONTRACTIONS "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" TAIL_RE, NULL};
static const char *const k_bailingmoe[] = {
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+", NULL};
static const char *const k_seed_coder[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+" TAIL_RE,
    NULL};
static const char *const k_ufakzeka[] = {
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" TAIL_RE, NULL};
static const char *const k_grok2[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" TAIL_RE,
    NULL};
static const char *const k_laguna[] = {
    "[^\\n]+|[\\n]+",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" TAIL_RE, NULL};
static const char *const k_exaone_moe[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+", NULL};
static const char *const k_minicpm5[] = {
    "\\p{N}{1,3}",
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" TAIL_RE,
    NULL};
/* clang-format on */

/* GLM's names also make llama.cpp's default BOS id none; Sluice's BPE default is none. */
enum { IGN = SL__PRE_IGNORE_MERGES, KEEP = SL__PRE_KEEP_SPACES, BOS = SL__PRE_ADD_BOS };

static const sl__pretok_def k_defs[] = {
    {"default", SL_PRETOK_DEFAULT, NULL, 0},
    {"llama3", SL_PRETOK_LLAMA3, NULL, IGN | BOS},
    {"llama-v3", SL_PRETOK_LLAMA3, NULL, IGN | BOS},
    {"llama-bpe", SL_PRETOK_LLAMA3, NULL, IGN | BOS},
    {"falcon3", SL_PRETOK_LLAMA3, NULL, IGN | BOS},
    {"falcon-h1", SL_PRETOK_LLAMA3, NULL, IGN | BOS},
    {"pixtral", SL_PRETOK_LLAMA3, NULL, IGN | BOS},
    {"midm-2.0", SL_PRETOK_LLAMA3, NULL, IGN | BOS},
    {"lfm2", SL_PRETOK_LLAMA3, NULL, IGN | BOS},
    {"jina-v5-nano", SL_PRETOK_LLAMA3, NULL, IGN | BOS},
    {"dbrx", SL_PRETOK_LLAMA3, NULL, 0},
    {"smaug-bpe", SL_PRETOK_LLAMA3, NULL, 0},
    {"chatglm-bpe", SL_PRETOK_LLAMA3, NULL, 0},
    {"glm4", SL_PRETOK_LLAMA3, NULL, IGN},
    {"glm5", SL_PRETOK_LLAMA3, NULL, IGN},
    {"gpt-2", SL_PRETOK_GPT2, NULL, 0},
    {"phi-2", SL_PRETOK_GPT2, NULL, 0},
    {"jina-es", SL_PRETOK_GPT2, NULL, 0},
    {"jina-de", SL_PRETOK_GPT2, NULL, 0},
    {"gigachat", SL_PRETOK_GPT2, NULL, 0},
    {"jina-v2-es", SL_PRETOK_GPT2, NULL, 0},
    {"jina-v2-de", SL_PRETOK_GPT2, NULL, 0},
    {"a.x-4.0", SL_PRETOK_GPT2, NULL, 0},
    {"mellum", SL_PRETOK_GPT2, NULL, 0},
    {"modern-bert", SL_PRETOK_GPT2, NULL, 0},
    {"mpt", SL_PRETOK_GPT2, NULL, 0},
    {"olmo", SL_PRETOK_GPT2, NULL, 0},
    {"jais", SL_PRETOK_GPT2, NULL, 0},
    {"exaone4", SL_PRETOK_GPT2, NULL, 0},
    {"trillion", SL_PRETOK_GPT2, NULL, KEEP},
    {"granite-docling", SL_PRETOK_GPT2, NULL, KEEP},
    {"qwen2", SL_PRETOK_QWEN2, NULL, KEEP},
    {"deepseek-r1-qwen", SL_PRETOK_QWEN2, NULL, KEEP},
    {"kormo", SL_PRETOK_QWEN2, NULL, KEEP},
    {"f2llmv2", SL_PRETOK_QWEN2, NULL, KEEP},
    {"megrez", SL_PRETOK_QWEN2, NULL, 0},
    {"stablelm2", SL_PRETOK_QWEN2, NULL, 0},
    {"hunyuan", SL_PRETOK_QWEN2, NULL, KEEP},
    {"solar-open", SL_PRETOK_QWEN2, NULL, KEEP},
    {"gpt-4o", SL_PRETOK_O200K, NULL, KEEP},
    {"llama4", SL_PRETOK_O200K, NULL, KEEP},
    {"kanana2", SL_PRETOK_O200K, NULL, KEEP},
    {"talkie", SL_PRETOK_O200K, NULL, KEEP},
    {"minimax-m2", SL_PRETOK_O200K, NULL, KEEP},
    {"deepseek-llm", SL_PRETOK_REGEX, k_deepseek_llm, KEEP},
    {"deepseek-coder", SL_PRETOK_REGEX, k_deepseek_coder, KEEP},
    {"deepseek-v3", SL_PRETOK_REGEX, k_deepseek_v3, KEEP},
    {"hunyuan-dense", SL_PRETOK_REGEX, k_deepseek_v3, KEEP},
    {"joyai-llm", SL_PRETOK_REGEX, k_deepseek_v3, KEEP},
    {"hy_v4", SL_PRETOK_REGEX, k_deepseek_v3, KEEP},
    {"spark2_5", SL_PRETOK_REGEX, k_spark2_5, KEEP},
    {"youtu", SL_PRETOK_REGEX, k_youtu, KEEP | IGN},
    {"falcon", SL_PRETOK_REGEX, k_falcon, 0},
    {"starcoder", SL_PRETOK_REGEX, k_starcoder, 0},
    {"refact", SL_PRETOK_REGEX, k_starcoder, 0},
    {"command-r", SL_PRETOK_REGEX, k_starcoder, KEEP},
    {"smollm", SL_PRETOK_REGEX, k_starcoder, KEEP},
    {"codeshell", SL_PRETOK_REGEX, k_starcoder, 0},
    {"exaone", SL_PRETOK_REGEX, k_starcoder, 0},
    {"minerva-7b", SL_PRETOK_REGEX, k_starcoder, 0},
    {"mellum2", SL_PRETOK_REGEX, k_starcoder, 0},
    {"qwen35", SL_PRETOK_REGEX, k_qwen35, KEEP},
    {"poro-chat", SL_PRETOK_REGEX, k_bloom, KEEP},
    {"bloom", SL_PRETOK_REGEX, k_bloom, 0},
    {"gpt3-finnish", SL_PRETOK_REGEX, k_bloom, 0},
    {"viking", SL_PRETOK_REGEX, k_viking, KEEP},
    {"jais-2", SL_PRETOK_REGEX, k_jais2, 0},
    {"tekken", SL_PRETOK_REGEX, k_tekken, KEEP | IGN | BOS},
    {"kimi-k2", SL_PRETOK_REGEX, k_kimi_k2, KEEP},
    {"bailingmoe", SL_PRETOK_REGEX, k_bailingmoe, KEEP},
    {"bailingmoe2", SL_PRETOK_REGEX, k_bailingmoe, KEEP},
    {"llada-moe", SL_PRETOK_REGEX, k_bailingmoe, KEEP},
    {"seed-coder", SL_PRETOK_REGEX, k_seed_coder, KEEP},
    {"ufakzeka", SL_PRETOK_REGEX, k_ufakzeka, KEEP},
    {"grok-2", SL_PRETOK_REGEX, k_grok2, KEEP},
    {"laguna", SL_PRETOK_REGEX, k_laguna, KEEP},
    {"exaone-moe", SL_PRETOK_REGEX, k_exaone_moe, 0},
    {"minicpm5", SL_PRETOK_REGEX, k_minicpm5, IGN},
};

const sl__pretok_def *sl__pretok_find(const char *name)
{
    for (size_t i = 0; i < sizeof k_defs / sizeof *k_defs; i++)
        if (!strcmp(name, k_defs[i].name)) return &k_defs[i];
    return NULL;
}

const sl__pretok_def *sl__pretok_at(size_t i)
{
    return i < sizeof k_defs / sizeof *k_defs ? &k_defs[i] : NULL;
}

sl_status sl__pretok_init(sl__pretok *pt, const sl__pretok_def *d, sl_error *err)
{
    *pt = (sl__pretok){.kind = d->kind};
    for (size_t i = 0; d->re && d->re[i]; i++) {
        if (i == SL__PRETOK_MAX_RE) {
            sl__pretok_free(pt);
            return sl_error_set(err, SL_ERR_INVALID, "pre-tokenizer '%s': over %d stages",
                                d->name, SL__PRETOK_MAX_RE);
        }
        sl_status st = sl__regex_compile(d->re[i], &pt->re[i], err);
        if (st != SL_OK) {
            sl__pretok_free(pt);
            return st;
        }
        pt->n_re = i + 1;
    }
    return SL_OK;
}

void sl__pretok_free(sl__pretok *pt)
{
    for (size_t i = 0; i < pt->n_re; i++) sl__regex_free(pt->re[i]);
    *pt = (sl__pretok){0};
}
