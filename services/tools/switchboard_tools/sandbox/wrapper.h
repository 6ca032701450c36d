/* The compiled sandbox wrapper (wrapper.c, wrapper_seccomp.c): the same confine-measure-report-exec
 * steps as inner.py and inner_seccomp.py, without starting a Python interpreter per call (which
 * cost ~35-40 ms of CPU; this program starts in under one). See native.py for how it is built
 * and found, and docs/footprint.md ("Sandboxed exec") for why. */
#ifndef SB_WRAPPER_H
#define SB_WRAPPER_H

#include <stddef.h>
#include <stdint.h>

/* A growing error list, as inner.py's ``errors``: "landlock: ...", "seccomp: ...". */
#define SB_MAX_ERRORS 8
#define SB_ERROR_LEN 512
struct sb_errors {
    char text[SB_MAX_ERRORS][SB_ERROR_LEN];
    int count;
};

void sb_error(struct sb_errors *errors, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* inner_seccomp.apply_seccomp + start_supervisor: load the filter (libseccomp, loaded with
 * dlopen like inner_seccomp.py loads it with ctypes) and fork the signal supervisor. Returns 0,
 * or -1 with the reason appended to ``errors`` (prefixed "seccomp: "). */
int sb_apply_seccomp(int network, struct sb_errors *errors);

/* inner_seccomp.signals_confined: kill(-1, 0) refused with EPERM (only the supervisor says so). */
int sb_signals_confined(void);

/* /proc/<pid>/stat field ``index`` (counted after the command name, 0 = state) into ``out``;
 * 0 on success, -1 if the process is gone or the file is malformed. */
int sb_stat_field(int pid, int index, char *out, size_t size);

/* A decimal number, digits only, into ``out``: 0, or -1 if malformed or out of range. */
int sb_parse_u64(const char *text, uint64_t *out);

/* "sandbox-wrapper outer ...": the first stage (wrapper_outer.c). ``argv[0]`` is "outer". */
int sb_outer_main(int argc, char **argv);

#endif
