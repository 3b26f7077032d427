/* The text helpers of model_flags.h (tokenizing through the public API), apart from the flag
 * parsing so that the flags need no tokenizer. */
#include <stdlib.h>

#include "tools/common/model_flags.h"

bool sl_cli_model_adds_bos(const sl_model *m)
{
    sl_model_info info;
    sl_model_info_get(m, &info);
    int32_t t[4];
    size_t n = 0;
    if (info.bos < 0 || sl_tokenize(m, "", 0, true, false, t, 4, &n, NULL)) return false;
    return n >= 1 && t[0] == info.bos;
}

int sl_cli_tokenize(const sl_model *m, const char *cmd, const char *model_path, const char *text,
                    size_t len, bool add_special, bool parse_special, int32_t **out,
                    size_t *n_out)
{
    sl_error err = {0};
    size_t cap = len + 8, n = 0;
    int32_t *t = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        int32_t *nt = realloc(t, cap * sizeof *t);
        if (!nt) {
            fprintf(stderr, "sluice %s: out of memory (tokens)\n", cmd);
            free(t);
            return 1;
        }
        t = nt;
        const sl_status st = sl_tokenize(m, text, len, add_special, parse_special, t, cap, &n, &err);
        if (st == SL_OK) {
            *out = t;
            *n_out = n;
            return 0;
        }
        if (st != SL_ERR_RANGE || n <= cap) break;
        cap = n;
    }
    fprintf(stderr, "sluice %s: %s: tokenize: %s\n", cmd, model_path, err.msg);
    free(t);
    return 1;
}

int sl_cli_token_piece(const sl_model *m, int32_t tok, char **buf, size_t *cap, size_t *n,
                       sl_error *err)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        const sl_status st = sl_token_to_piece(m, tok, false, *buf, *cap, n, err);
        if (st == SL_OK && *n < *cap) return 0;
        if (st != SL_OK && st != SL_ERR_RANGE) return 1;
        char *nb = realloc(*buf, *n + 1);
        if (!nb) return 1;
        *buf = nb;
        *cap = *n + 1;
    }
    return 1;
}
