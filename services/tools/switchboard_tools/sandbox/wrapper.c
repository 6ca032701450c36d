/* The compiled sandbox wrapper: inner.py step for step (its docstring says what each layer is
 * for), so that a sandboxed call does not start a Python interpreter.
 *
 *   sandbox-wrapper KEY=VALUE... -- COMMAND ARGS...
 *
 * One setting per argument (native.wrapper_args builds them from the same configuration the
 * Python wrapper gets as JSON): nothing to unquote, a path is everything after the first "=".
 * An unknown or malformed setting is refused before anything runs (exit 2, no report), as the
 * Python wrapper fails on a configuration it cannot read. Keys: report_fd=N seccomp=0|1
 * landlock=0|1 network=0|1 ro=PATH rw=PATH rwfd=N dev=PATH require=LAYER require_any=A|B
 * cgroup=CONTROLLER:PATH host_cgroupns=INO ns=KIND:INO host_net=INO nproc=N.
 *
 *   sandbox-wrapper outer KEY=VALUE... -- PROGRAM ARGS...
 *
 * is the first stage, run before bubblewrap: see wrapper_outer.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "wrapper.h"
#include "wrapper_report.h"

extern char **environ;

#define SYS_CREATE_RULESET 444
#define SYS_ADD_RULE 445
#define SYS_RESTRICT_SELF 446
#define FS_FILE_RIGHTS ((1ULL << 0) | (1ULL << 1) | (1ULL << 2) | (1ULL << 14) | (1ULL << 15))
#define FS_READ ((1ULL << 0) | (1ULL << 2) | (1ULL << 3))
#define DEV_FILE_RW ((1ULL << 1) | (1ULL << 2) | (1ULL << 14) | (1ULL << 15))
#define NET_ALL_TCP ((1ULL << 0) | (1ULL << 1))
#define SCOPE_ALL ((1ULL << 0) | (1ULL << 1))

struct ruleset_attr {
    uint64_t handled_access_fs, handled_access_net, scoped;
};
struct path_beneath {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

static int parse_fd(const char *text, int *out) {
    uint64_t value;
    if (sb_parse_u64(text, &value) || value > INT32_MAX)
        return -1;
    *out = (int)value;
    return 0;
}

static int parse_bool(const char *text, int *out) {
    if (strcmp(text, "0") && strcmp(text, "1"))
        return -1;
    *out = text[0] == '1';
    return 0;
}

/* "NAME:VALUE" -> NAME and VALUE, in place (the argument strings are this process's own). */
static int split_pair(char *text, const char **name, const char **value) {
    char *colon = strchr(text, ':');
    if (colon == NULL)
        return -1;
    *colon = '\0';
    *name = text;
    *value = colon + 1;
    return 0;
}

static int add_item(const char **items, int *count, const char *value) {
    if (*count >= SB_MAX_ITEMS)
        return -1;
    items[(*count)++] = value;
    return 0;
}

static int parse_setting(struct sb_config *cfg, char *arg) {
    char *eq = strchr(arg, '=');
    if (eq == NULL)
        return -1;
    *eq = '\0';
    const char *key = arg;
    char *value = eq + 1;
    if (!strcmp(key, "report_fd"))
        return parse_fd(value, &cfg->report_fd);
    if (!strcmp(key, "seccomp"))
        return parse_bool(value, &cfg->seccomp);
    if (!strcmp(key, "landlock"))
        return parse_bool(value, &cfg->landlock);
    if (!strcmp(key, "network"))
        return parse_bool(value, &cfg->network);
    if (!strcmp(key, "ro") || !strcmp(key, "rw") || !strcmp(key, "rwfd") || !strcmp(key, "dev")) {
        if (cfg->n_rules >= SB_MAX_ITEMS)
            return -1;
        struct sb_rule *r = &cfg->rules[cfg->n_rules++];
        r->kind = key[0] == 'r' ? (key[1] == 'o' ? RULE_RO : RULE_RW) : RULE_DEV;
        r->path = value;
        r->fd = -1;
        return !strcmp(key, "rwfd") ? parse_fd(value, &r->fd) : 0;
    }
    if (!strcmp(key, "require"))
        return add_item(cfg->require, &cfg->n_require, value);
    if (!strcmp(key, "require_any"))
        return add_item(cfg->require_any, &cfg->n_require_any, value);
    if (!strcmp(key, "cgroup")) {
        if (cfg->n_cgroup >= SB_MAX_ITEMS)
            return -1;
        struct sb_pair *p = &cfg->cgroup[cfg->n_cgroup++];
        return split_pair(value, &p->name, &p->value);
    }
    if (!strcmp(key, "ns")) {
        const char *ino;
        if (cfg->n_ns >= SB_MAX_NS || split_pair(value, &cfg->ns[cfg->n_ns].kind, &ino))
            return -1;
        const char *kind = cfg->ns[cfg->n_ns].kind;
        if (*kind == '\0' || strspn(kind, "abcdefghijklmnopqrstuvwxyz_") != strlen(kind))
            return -1; /* a name under /proc/self/ns, nothing else */
        return sb_parse_u64(ino, &cfg->ns[cfg->n_ns++].ino);
    }
    if (!strcmp(key, "host_cgroupns")) {
        cfg->has_host_cgroupns = 1;
        return sb_parse_u64(value, &cfg->host_cgroupns);
    }
    if (!strcmp(key, "host_net")) {
        cfg->has_host_net = 1;
        return sb_parse_u64(value, &cfg->host_net);
    }
    if (!strcmp(key, "nproc"))
        return sb_parse_u64(value, &cfg->nproc);
    return -1;
}

/* Every argument passed, unused ones as 0 (the kernel rejects flags it does not know). */
static long sys_call(long nr, long a, long b, long c, long d) {
    return syscall(nr, a, b, c, d);
}

int sb_landlock_abi(void) {
    long abi = sys_call(SYS_CREATE_RULESET, 0, 0, 1, 0);
    return abi > 0 ? (int)abi : 0;
}

/* inner.apply_landlock: the ABI used (0: none); -1 with the reason in ``errors``. */
static int apply_landlock(const struct sb_config *cfg, struct sb_errors *errors) {
    int abi = sb_landlock_abi();
    if (abi < 1)
        return 0;
    uint64_t handled = (1ULL << 13) - 1;
    handled |= abi >= 2 ? 1ULL << 13 : 0; /* refer */
    handled |= abi >= 3 ? 1ULL << 14 : 0; /* truncate */
    handled |= abi >= 5 ? 1ULL << 15 : 0; /* ioctl_dev */
    struct ruleset_attr attr = {handled, 0, 0};
    size_t size = 8;
    if (abi >= 4 && !cfg->network) {
        attr.handled_access_net = NET_ALL_TCP;
        size = 16;
    }
    if (abi >= 6) {
        attr.scoped = SCOPE_ALL;
        size = 24;
    }
    int ruleset = (int)sys_call(SYS_CREATE_RULESET, (long)&attr, (long)size, 0, 0);
    if (ruleset < 0) {
        sb_error(errors, "landlock: [Errno %d] landlock_create_ruleset failed", errno);
        return -1;
    }
    int result = abi;
    for (int i = 0; i < cfg->n_rules && result > 0; i++) {
        const struct sb_rule *r = &cfg->rules[i];
        uint64_t access = r->kind == RULE_RO ? FS_READ : r->kind == RULE_RW ? handled : DEV_FILE_RW;
        int fd = r->fd >= 0 ? r->fd : open(r->path, O_PATH | O_CLOEXEC);
        if (fd < 0)
            continue; /* a path this host does not have */
        struct stat st;
        int is_dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
        struct path_beneath rule = {access & handled & (is_dir ? ~0ULL : FS_FILE_RIGHTS), fd};
        if (sys_call(SYS_ADD_RULE, ruleset, 1, (long)&rule, 0) != 0) {
            if (r->fd >= 0)
                sb_error(errors, "landlock: [Errno %d] landlock_add_rule %d failed", errno, fd);
            else
                sb_error(errors, "landlock: [Errno %d] landlock_add_rule '%s' failed", errno,
                         r->path);
            result = -1;
        }
        if (r->fd < 0)
            close(fd); /* passed fds are closed by main() after all layers */
    }
    if (result > 0 && sys_call(SYS_RESTRICT_SELF, ruleset, 0, 0, 0) != 0) {
        sb_error(errors, "landlock: [Errno %d] landlock_restrict_self failed", errno);
        result = -1;
    }
    close(ruleset);
    return result;
}

/* os.execvp as inner.py calls it: the PATH of this environment ("/bin:/usr/bin" without one),
 * execve per entry, the first error other than ENOENT/ENOTDIR (else the last) reported. Not
 * libc's execvp, which would run a file without "#!" with /bin/sh where Python refuses it. */
static int exec_command(char **argv) {
    const char *file = argv[0];
    if (strchr(file, '/')) {
        execve(file, argv, environ);
        return errno;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin";
    int saved = 0, last = ENOENT;
    for (const char *dir = path;; dir++) {
        size_t len = strcspn(dir, ":");
        char candidate[4096];
        int n = len == 0 ? snprintf(candidate, sizeof candidate, "%s", file)
                         : snprintf(candidate, sizeof candidate, "%.*s%s%s", (int)len, dir,
                                    dir[len - 1] == '/' ? "" : "/", file);
        if (n < 0 || (size_t)n >= sizeof candidate)
            errno = ENAMETOOLONG; /* never a truncated path */
        else
            execve(candidate, argv, environ);
        last = errno;
        if (last != ENOENT && last != ENOTDIR && saved == 0)
            saved = last;
        dir += len;
        if (*dir == '\0')
            break;
    }
    return saved ? saved : last;
}

/* What the Python wrapper's interpreter does to the environment the command inherits (PEP 538,
 * not switched off by -I): with LC_ALL unset or empty and the C or POSIX locale for LC_CTYPE,
 * LC_CTYPE=C.UTF-8 (or the first of C.utf8, UTF-8 this host has) is set. */
static void coerce_c_locale(void) {
    static const char *const targets[] = {"C.UTF-8", "C.utf8", "UTF-8"};
    const char *all = getenv("LC_ALL");
    if (all != NULL && *all != '\0')
        return;
    setlocale(LC_CTYPE, "");
    const char *current = setlocale(LC_CTYPE, NULL);
    if (current == NULL || (strcmp(current, "C") != 0 && strcmp(current, "POSIX") != 0))
        return;
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
        if (setlocale(LC_CTYPE, targets[i]) == NULL)
            continue;
        const char *codeset = nl_langinfo(CODESET);
        if (codeset == NULL || *codeset == '\0') {
            setlocale(LC_CTYPE, "");
            continue;
        }
        setenv("LC_CTYPE", targets[i], 1);
        return;
    }
}

static void say(const char *a, const char *b, const char *c) {
    char line[4096];
    int n = snprintf(line, sizeof line, "%s%s%s\n", a, b, c);
    if (n > 0 && write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) {
    }
}

int main(int argc, char **argv) {
    static struct sb_config cfg = {.report_fd = -1};
    static struct sb_errors errors;
    if (argc > 1 && strcmp(argv[1], "outer") == 0)
        return sb_outer_main(argc - 1, argv + 1);
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (parse_setting(&cfg, argv[i]) != 0) {
            say("sandbox wrapper: bad setting: ", argv[i], "");
            return 2;
        }
    }
    if (i >= argc - 1 || cfg.report_fd < 0) {
        say("sandbox wrapper: usage: KEY=VALUE... -- COMMAND [ARGS...]", "", "");
        return 2;
    }
    char **command = argv + i + 1;
    if (cfg.nproc) { /* inside a user namespace this counts this sandbox's processes only */
        struct rlimit limit = {cfg.nproc, cfg.nproc};
        if (setrlimit(RLIMIT_NPROC, &limit) != 0) {
            say("sandbox wrapper: setrlimit(RLIMIT_NPROC): ", strerror(errno), "");
            return 1;
        }
    }
    int abi = 0;
    if (cfg.landlock) {
        abi = apply_landlock(&cfg, &errors);
        abi = abi < 0 ? 0 : abi;
    }
    if (cfg.seccomp)
        sb_apply_seccomp(cfg.network, &errors);
    struct sb_report report;
    sb_measure(&cfg, abi, &report);
    int refused = sb_write_report(&cfg, &report, &errors);
    for (int r = 0; r < cfg.n_rules; r++)
        if (cfg.rules[r].fd >= 0) /* not consumed by Landlock: the command gets none */
            close(cfg.rules[r].fd);
    if (refused)
        return 126;
    /* What the Python wrapper's interpreter leaves for the command: CPython ignores SIGPIPE
     * and SIGXFSZ at start-up and os.execvp keeps that, so commands have always run with both
     * ignored (a write past RLIMIT_FSIZE fails with EFBIG rather than killing the command). */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    coerce_c_locale();
    int err = exec_command(command);
    if (err == ENOENT) {
        say(command[0], ": command not found", "");
        return 127;
    }
    say(command[0], ": ", err == EACCES || err == EPERM ? "permission denied" : strerror(err));
    return 126;
}
