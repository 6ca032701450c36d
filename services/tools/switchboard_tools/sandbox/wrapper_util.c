/* What every part of the compiled sandbox wrapper uses (wrapper.c, wrapper_outer.c,
 * wrapper_seccomp.c), kept apart so that the parts depend on it and not on each other. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "wrapper.h"

void sb_error(struct sb_errors *errors, const char *fmt, ...) {
    if (errors->count >= SB_MAX_ERRORS)
        return;
    va_list args;
    va_start(args, fmt);
    vsnprintf(errors->text[errors->count++], SB_ERROR_LEN, fmt, args);
    va_end(args);
}

int sb_parse_u64(const char *text, uint64_t *out) {
    char *end;
    if (*text < '0' || *text > '9')
        return -1;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || *end != '\0')
        return -1;
    *out = value;
    return 0;
}
