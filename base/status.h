/* sl_status: the one error convention of every Sluice module.
 *
 * Contract: a fallible function returns sl_status (SL_OK == 0 on success) and, when given a
 * non-NULL sl_error, fills err->msg with a sentence naming the file/field/value at fault.
 * Libraries never print and never exit on bad input; tools decide what to show.
 * This target depends on libc only, so the lowest modules (gguf/, base/device/) may use it. */
#ifndef SL_STATUS_H
#define SL_STATUS_H

#include <stdarg.h>

/* SL_API marks what libsluice.so exports: the functions of runtime/sluice.h and of the headers
 * it includes (base/status.h, base/parse.h, scheduler/policy/place_mode.h). Everything else is built with -fvisibility=hidden
 * (.bazelrc), so the shared object's symbol table is the public header and nothing more
 * (tests/runtime/exports_test.py checks it). */
#define SL_API __attribute__((visibility("default")))

typedef enum sl_status {
    SL_OK = 0,
    SL_ERR_INVALID,     /* bad argument or option value */
    SL_ERR_IO,          /* a system call on a file failed */
    SL_ERR_FORMAT,      /* malformed input file */
    SL_ERR_NOMEM,       /* an allocation failed */
    SL_ERR_NOT_FOUND,   /* key, tensor, file or device absent */
    SL_ERR_TYPE,        /* value exists with another type */
    SL_ERR_UNSUPPORTED, /* well-formed but not handled (e.g. big-endian GGUF) */
    SL_ERR_DEVICE,      /* device (CUDA or sim) error */
    SL_ERR_RANGE,       /* index, size or count out of range */
    SL_ERR_NOT_RESIDENT, /* a model's weights are not on the device (runtime/sluice.h) */
    SL_STATUS_COUNT
} sl_status;

enum { SL_ERROR_MSG_BYTES = 1024 };

typedef struct sl_error {
    sl_status code;
    char msg[SL_ERROR_MSG_BYTES];
} sl_error;

/* Stable lower-case name of a status ("ok", "format", ...). Never NULL. */
SL_API const char *sl_status_name(sl_status s);

/* Fills err (may be NULL) with code and a printf-formatted message; returns code, so that
 * `return sl_error_set(err, SL_ERR_FORMAT, "...")` is the idiom. Truncates long messages. */
SL_API sl_status sl_error_set(sl_error *err, sl_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
SL_API sl_status sl_error_setv(sl_error *err, sl_status code, const char *fmt, va_list ap);

/* Resets err to SL_OK with an empty message; NULL is allowed. */
SL_API void sl_error_clear(sl_error *err);

#endif
