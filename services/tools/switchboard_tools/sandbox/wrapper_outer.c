/* The compiled wrapper's first stage, run before bubblewrap (or, without namespaces, before the
 * wrapper's own second stage): what the executor's child did in a Python preexec_fn between fork
 * and exec (process.outer_preexec). A preexec_fn makes Python fork() the whole executor, its page
 * tables copied and its pages faulted in by the Python code run in the child (3.5-6 ms of CPU per
 * call measured, more for a larger executor); without one the executor starts this program with
 * vfork and it does the same steps itself. See docs/footprint.md ("Sandboxed exec").
 *
 *   sandbox-wrapper outer KEY=VALUE... -- PROGRAM ARGS...
 *
 * Keys: cgroup_fd=N (a cgroup.procs file the executor opened for writing: entered, then closed,
 * so nothing after this stage holds it), rlimit=NAME:N (cpu, fsize, nofile, core, as: soft and
 * hard limit lowered to N, never above the current hard limit, in the order given), uid=N (no
 * supplementary groups, gid and uid N for good), pdeathsig=PPID (SIGKILL once the parent dies;
 * PPID is the executor's pid, checked after it is set: a parent already gone means no start).
 * Applied in outer_preexec's order whatever the order of the arguments: the cgroup while still
 * root (the sandbox uid may not write cgroup files), the rlimits, the uid, no_new_privs (always)
 * and the parent-death signal last (a change of credentials clears it). A bad setting: exit 2;
 * a step that fails: exit 126; either with a message on stderr, before PROGRAM runs and without
 * an isolation report, so the executor refuses the call. PROGRAM is run by its path, no PATH. */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "wrapper.h"

#define OUTER_MAX 8

struct outer_config {
    int cgroup_fds[OUTER_MAX];
    int n_cgroup_fds;
    int limit_kinds[OUTER_MAX];
    rlim_t limit_values[OUTER_MAX];
    int n_limits;
    int has_uid;
    uid_t uid;
    int has_ppid;
    pid_t ppid;
};

static const struct {
    const char *name;
    int resource;
} LIMITS[] = {
    {"cpu", RLIMIT_CPU}, {"fsize", RLIMIT_FSIZE}, {"nofile", RLIMIT_NOFILE},
    {"core", RLIMIT_CORE}, {"as", RLIMIT_AS},
};

static void complain(const char *what, const char *detail) {
    dprintf(2, "sandbox wrapper: %s%s\n", what, detail);
}

/* ``text`` is ``name`` followed by ``sep``: the rest, else NULL. The argument is not changed
 * (a bad setting is quoted whole). */
static const char *after(const char *text, const char *name, char sep) {
    size_t n = strlen(name);
    return strncmp(text, name, n) == 0 && text[n] == sep ? text + n + 1 : NULL;
}

static int parse_limit(struct outer_config *cfg, const char *value) {
    uint64_t n;
    for (size_t i = 0; i < sizeof LIMITS / sizeof *LIMITS; i++) {
        const char *number = after(value, LIMITS[i].name, ':');
        if (number == NULL)
            continue;
        if (cfg->n_limits >= OUTER_MAX || sb_parse_u64(number, &n))
            return -1;
        cfg->limit_kinds[cfg->n_limits] = LIMITS[i].resource;
        cfg->limit_values[cfg->n_limits++] = (rlim_t)n;
        return 0;
    }
    return -1;
}

static int parse_outer(struct outer_config *cfg, const char *arg) {
    const char *value;
    uint64_t n;
    if ((value = after(arg, "rlimit", '=')) != NULL)
        return parse_limit(cfg, value);
    if ((value = after(arg, "cgroup_fd", '=')) != NULL) {
        if (sb_parse_u64(value, &n) || n > INT32_MAX || cfg->n_cgroup_fds >= OUTER_MAX)
            return -1;
        cfg->cgroup_fds[cfg->n_cgroup_fds++] = (int)n;
        return 0;
    }
    if ((value = after(arg, "uid", '=')) != NULL) {
        if (sb_parse_u64(value, &n) || n >= UINT32_MAX || cfg->has_uid)
            return -1;
        cfg->has_uid = 1;
        cfg->uid = (uid_t)n;
        return 0;
    }
    if ((value = after(arg, "pdeathsig", '=')) != NULL) {
        if (sb_parse_u64(value, &n) || n == 0 || n > INT32_MAX || cfg->has_ppid)
            return -1;
        cfg->has_ppid = 1;
        cfg->ppid = (pid_t)n;
        return 0;
    }
    return -1;
}

/* process.lower_limit: soft and hard to ``value``, neither above the current hard limit. */
static int lower_limit(int resource, rlim_t value) {
    struct rlimit current, next = {value, value};
    if (getrlimit(resource, &current) != 0)
        return -1;
    if (current.rlim_max != RLIM_INFINITY) {
        next.rlim_cur = value < current.rlim_max ? value : current.rlim_max;
        next.rlim_max = next.rlim_cur;
    }
    return setrlimit(resource, &next);
}

/* The steps, in outer_preexec's order; 0, or -1 with errno set and ``*step`` naming it. */
static int apply_outer(const struct outer_config *cfg, const char **step) {
    *step = "entering the call's cgroup: ";
    for (int i = 0; i < cfg->n_cgroup_fds; i++) {
        if (write(cfg->cgroup_fds[i], "0", 1) != 1 || close(cfg->cgroup_fds[i]) != 0)
            return -1;
    }
    *step = "setrlimit: ";
    for (int i = 0; i < cfg->n_limits; i++) {
        if (lower_limit(cfg->limit_kinds[i], cfg->limit_values[i]) != 0)
            return -1;
    }
    if (cfg->has_uid) {
        *step = "dropping to the sandbox uid: ";
        if (setgroups(0, NULL) != 0 || setresgid(cfg->uid, cfg->uid, cfg->uid) != 0 ||
            setresuid(cfg->uid, cfg->uid, cfg->uid) != 0)
            return -1;
    }
    *step = "prctl(PR_SET_NO_NEW_PRIVS): ";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    if (cfg->has_ppid) {
        *step = "prctl(PR_SET_PDEATHSIG): ";
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
            return -1;
        if (getppid() != cfg->ppid) {
            *step = "the executor is gone: ";
            errno = ESRCH;
            return -1;
        }
    }
    return 0;
}

int sb_outer_main(int argc, char **argv) {
    static struct outer_config cfg;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (parse_outer(&cfg, argv[i]) != 0) {
            complain("bad setting: ", argv[i]);
            return 2;
        }
    }
    if (i >= argc - 1) {
        complain("usage: outer KEY=VALUE... -- PROGRAM [ARGS...]", "");
        return 2;
    }
    char **program = argv + i + 1;
    const char *step;
    if (apply_outer(&cfg, &step) != 0) {
        complain(step, strerror(errno));
        return 126;
    }
    execv(program[0], program);
    int err = errno;
    complain(program[0], err == ENOENT ? ": not found" : ": cannot be executed");
    return err == ENOENT ? 127 : 126;
}
