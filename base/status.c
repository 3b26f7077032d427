#include "base/status.h"

#include <stdio.h>
#include <string.h>

static const char *const k_names[SL_STATUS_COUNT] = {
    [SL_OK] = "ok",
    [SL_ERR_INVALID] = "invalid",
    [SL_ERR_IO] = "io",
    [SL_ERR_FORMAT] = "format",
    [SL_ERR_NOMEM] = "nomem",
    [SL_ERR_NOT_FOUND] = "not_found",
    [SL_ERR_TYPE] = "type",
    [SL_ERR_UNSUPPORTED] = "unsupported",
    [SL_ERR_DEVICE] = "device",
    [SL_ERR_RANGE] = "range",
    [SL_ERR_NOT_RESIDENT] = "not_resident",
};

const char *sl_status_name(sl_status s)
{
    if ((unsigned)s >= SL_STATUS_COUNT) return "unknown";
    return k_names[s];
}

sl_status sl_error_setv(sl_error *err, sl_status code, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return code;
}

sl_status sl_error_set(sl_error *err, sl_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_error_setv(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void sl_error_clear(sl_error *err)
{
    if (err) {
        err->code = SL_OK;
        err->msg[0] = '\0';
    }
}
