/* The seccomp layer of the compiled wrapper: inner_seccomp.py, rule for rule (see its docstring
 * for what the filter denies and why the signal senders go to a supervisor). libseccomp is
 * loaded with dlopen by its soname, as inner_seccomp.py loads it with ctypes: the filter is built
 * by the same library calls, so both wrappers load the same BPF program, and no libseccomp
 * headers are needed to build this (Debian ships them in libseccomp-dev only). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wrapper.h"

#define ACT_ALLOW 0x7FFF0000U
#define ACT_NOTIFY 0x7FC00000U
#define ACT_ERRNO(e) (0x00050000U | ((unsigned)(e) & 0xFFFFU))
#define CMP_NE 1
#define CMP_EQ 4
#define CMP_MASKED_EQ 7
#define FILTER_FLAG_NEW_LISTENER (1U << 3)
#define SB_F_SETOWN 8
#define SB_F_SETOWN_EX 15
#define SB_FIOSETOWN 0x8901
#define SB_SIOCSPGRP 0x8902

struct arg_cmp { /* struct scmp_arg_cmp */
    unsigned int arg;
    int op;
    uint64_t datum_a, datum_b;
};

static const char *const DENIED[] = {
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root",
    "chroot", "unshare", "setns", "bpf", "keyctl", "add_key", "request_key", "kexec_load",
    "kexec_file_load", "init_module", "finit_module", "delete_module", "perf_event_open",
    "userfaultfd", "open_by_handle_at", "name_to_handle_at", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "swapon", "swapoff", "reboot", "acct", "quotactl",
    "setsid", "setpgid", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
    "mount_setattr", "pidfd_getfd", "process_madvise",
};
static const uint64_t CLONE_NS_FLAGS[] = {
    0x10000000, 0x00020000, 0x20000000, 0x40000000, 0x08000000, 0x04000000, 0x02000000,
};
static const char *const SIGNAL_SYSCALLS[] = {
    "kill", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal",
};

/* The syscalls the supervisor answers, by number (inner_seccomp's ``notified``). */
#define MAX_NOTIFIED 16
static struct {
    int nr;
    const char *name;
} notified[MAX_NOTIFIED];
static int n_notified;

static struct {
    void *(*init)(uint32_t);
    int (*resolve)(const char *);
    int (*rule_add_array)(void *, uint32_t, int, unsigned int, const struct arg_cmp *);
    int (*load)(void *);
    int (*notify_fd)(void *);
    void (*release)(void *);
    void *ctx;
} lib;

/* One rule as inner_seccomp's ``rule()``: skipped when the name is no syscall here. */
static int rule(const char *name, uint32_t action, unsigned n, const struct arg_cmp *cmps,
                struct sb_errors *errors) {
    struct arg_cmp none[1] = {{0, 0, 0, 0}};
    int nr = lib.resolve(name);
    if (nr < 0)
        return 0;
    int rc = lib.rule_add_array(lib.ctx, action, nr, n, n ? cmps : none);
    if (rc < 0) {
        sb_error(errors, "seccomp: [Errno %d] seccomp rule for %s failed", -rc, name);
        return -1;
    }
    if (action == ACT_NOTIFY && n_notified < MAX_NOTIFIED) {
        notified[n_notified].nr = nr;
        notified[n_notified++].name = name;
    }
    return 0;
}

static int load_library(struct sb_errors *errors) {
    void *handle = dlopen("libseccomp.so.2", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        sb_error(errors, "seccomp: %s", dlerror());
        return -1;
    }
    *(void **)&lib.init = dlsym(handle, "seccomp_init");
    *(void **)&lib.resolve = dlsym(handle, "seccomp_syscall_resolve_name");
    *(void **)&lib.rule_add_array = dlsym(handle, "seccomp_rule_add_array");
    *(void **)&lib.load = dlsym(handle, "seccomp_load");
    *(void **)&lib.notify_fd = dlsym(handle, "seccomp_notify_fd");
    *(void **)&lib.release = dlsym(handle, "seccomp_release");
    if (!lib.init || !lib.resolve || !lib.rule_add_array || !lib.load || !lib.notify_fd ||
        !lib.release) {
        sb_error(errors, "seccomp: libseccomp.so.2 lacks a function (2.5 or later needed)");
        return -1;
    }
    return 0;
}

static int add_rules(int network, struct sb_errors *errors) {
    uint32_t eperm = ACT_ERRNO(EPERM);
    for (size_t i = 0; i < sizeof DENIED / sizeof *DENIED; i++)
        if (rule(DENIED[i], eperm, 0, NULL, errors))
            return -1;
    for (size_t i = 0; i < sizeof CLONE_NS_FLAGS / sizeof *CLONE_NS_FLAGS; i++) {
        struct arg_cmp c = {0, CMP_MASKED_EQ, CLONE_NS_FLAGS[i], CLONE_NS_FLAGS[i]};
        if (rule("clone", eperm, 1, &c, errors))
            return -1;
    }
    if (rule("clone3", ACT_ERRNO(ENOSYS), 0, NULL, errors))
        return -1;
    if (!network) {
        struct arg_cmp c = {0, CMP_NE, AF_UNIX, 0};
        if (rule("socket", ACT_ERRNO(EACCES), 1, &c, errors))
            return -1;
    }
    for (size_t i = 0; i < sizeof SIGNAL_SYSCALLS / sizeof *SIGNAL_SYSCALLS; i++)
        if (rule(SIGNAL_SYSCALLS[i], ACT_NOTIFY, 0, NULL, errors))
            return -1;
    struct arg_cmp own = {0, CMP_NE, (uint64_t)getpid(), 0};
    struct arg_cmp setown = {1, CMP_EQ, SB_F_SETOWN, 0};
    struct arg_cmp setown_ex = {1, CMP_EQ, SB_F_SETOWN_EX, 0};
    struct arg_cmp fiosetown = {1, CMP_EQ, SB_FIOSETOWN, 0};
    struct arg_cmp siocspgrp = {1, CMP_EQ, SB_SIOCSPGRP, 0};
    struct arg_cmp listener = {1, CMP_MASKED_EQ, FILTER_FLAG_NEW_LISTENER,
                               FILTER_FLAG_NEW_LISTENER};
    if (rule("tgkill", ACT_NOTIFY, 1, &own, errors) ||
        rule("fcntl", ACT_NOTIFY, 1, &setown, errors) ||
        rule("fcntl", eperm, 1, &setown_ex, errors) ||
        rule("ioctl", eperm, 1, &fiosetown, errors) ||
        rule("ioctl", eperm, 1, &siocspgrp, errors) ||
        rule("seccomp", eperm, 1, &listener, errors))
        return -1;
    return 0;
}

int sb_stat_field(int pid, int index, char *out, size_t size) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    p++;
    for (int i = 0;; i++) {
        p += strspn(p, " \t\n");
        size_t len = strcspn(p, " \t\n");
        if (len == 0)
            return -1;
        if (i == index) {
            if (len >= size)
                return -1;
            memcpy(out, p, len);
            out[len] = '\0';
            return 0;
        }
        p += len;
    }
}

static int in_group(long pid, long group) {
    char field[32];
    if (pid <= 0 || pid > INT32_MAX || sb_stat_field((int)pid, 2, field, sizeof field))
        return 0;
    char *end;
    long value = strtol(field, &end, 10);
    return *end == '\0' && value == group;
}

/* The process a pidfd (or a /proc/<pid> directory descriptor) of ``caller`` names (0: none). */
static long pidfd_target(int caller, int fd) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", caller, fd);
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0)
        return 0;
    ssize_t n = read(f, buf, sizeof buf - 1);
    close(f);
    if (n < 0)
        return 0;
    buf[n] = '\0';
    for (char *line = buf; line != NULL && *line; line = strchr(line, '\n')) {
        line += *line == '\n';
        if (strncmp(line, "Pid:", 4) == 0)
            return strtol(line + 4, NULL, 10);
    }
    snprintf(path, sizeof path, "/proc/%d/fd/%d", caller, fd);
    n = readlink(path, buf, sizeof buf - 1);
    if (n < 0)
        return 0;
    buf[n] = '\0';
    const char *digits = buf + 6;
    if (strncmp(buf, "/proc/", 6) != 0 || *digits == '\0' ||
        strspn(digits, "0123456789") != strlen(digits))
        return 0;
    return strtol(digits, NULL, 10);
}

static int allowed(const char *name, const __u64 *raw, int caller, long group) {
    long a0 = (int32_t)(uint32_t)raw[0], a1 = (int32_t)(uint32_t)raw[1];
    long a2 = (int32_t)(uint32_t)raw[2];
    if (strcmp(name, "kill") == 0) /* -1 is every process (even where the group is 1) */
        return a0 == 0 || (a0 < -1 && -a0 == group) || in_group(a0, group);
    if (!strcmp(name, "tkill") || !strcmp(name, "rt_sigqueueinfo") || !strcmp(name, "pidfd_open"))
        return in_group(a0, group);
    if (!strcmp(name, "tgkill") || !strcmp(name, "rt_tgsigqueueinfo"))
        return in_group(a0, group) && in_group(a1, group);
    if (!strcmp(name, "pidfd_send_signal"))
        return in_group(pidfd_target(caller, (int)a0), group);
    if (!strcmp(name, "fcntl")) /* F_SETOWN: a pid, or a process group as its negative */
        return a2 == 0 || (a2 < 0 && -a2 == group) || in_group(a2, group);
    return 0;
}

static const char *notified_name(int nr) {
    for (int i = 0; i < n_notified; i++)
        if (notified[i].nr == nr)
            return notified[i].name;
    return "";
}

/* inner_seccomp._serve: answer the listener until the command is gone. */
static void serve(int listener, long group, int command, const char *started) {
    static const int ignored[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2,
                                  SIGALRM};
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
        signal(ignored[i], SIG_IGN);
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; fd++)
        dup2(null, fd);
    /* Every descriptor but the listener (one by one only where close_range is missing). */
    if ((listener > 3 && syscall(SYS_close_range, 3, listener - 1, 0) != 0) ||
        syscall(SYS_close_range, listener + 1, ~0U, 0) != 0)
        for (int fd = 3; fd < 65536; fd++)
            if (fd != listener)
                close(fd);
    struct pollfd waiting = {listener, POLLIN, 0};
    for (;;) {
        int ready = poll(&waiting, 1, 1000);
        if (ready <= 0) {
            char now[64];
            if (ready == 0 && (sb_stat_field(command, 19, now, sizeof now) || strcmp(now, started)))
                return;
            continue;
        }
        struct seccomp_notif request;
        memset(&request, 0, sizeof request);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &request) != 0) {
            if (errno == EINTR || errno == ENOENT)
                continue;
            return;
        }
        int ok = allowed(notified_name(request.data.nr), request.data.args, (int)request.pid,
                         group);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &request.id) != 0)
            ok = 0; /* the caller is gone */
        struct seccomp_notif_resp response = {request.id, 0, ok ? 0 : -EPERM,
                                              ok ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0};
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &response); /* fails if the caller is gone */
    }
}

/* inner_seccomp.start_supervisor: a detached grandchild holds the listener; not this process. */
static int start_supervisor(int listener, struct sb_errors *errors) {
    long group = getpgrp();
    int command = getpid();
    char started[64] = "";
    if (sb_stat_field(command, 19, started, sizeof started))
        started[0] = '\0';
    pid_t pid = fork();
    if (pid < 0) {
        sb_error(errors, "seccomp: [Errno %d] %s", errno, strerror(errno));
        close(listener);
        return -1;
    }
    if (pid == 0) {
        if (fork() == 0)
            serve(listener, group, command, started);
        _exit(0);
    }
    close(listener);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    return 0;
}

int sb_apply_seccomp(int network, struct sb_errors *errors) {
    if (load_library(errors))
        return -1;
    lib.ctx = lib.init(ACT_ALLOW);
    if (lib.ctx == NULL) {
        sb_error(errors, "seccomp: seccomp_init failed");
        return -1;
    }
    int listener = -1;
    if (add_rules(network, errors) == 0) {
        int rc = lib.load(lib.ctx);
        if (rc < 0) {
            sb_error(errors, "seccomp: [Errno %d] seccomp_load failed", -rc);
        } else {
            listener = lib.notify_fd(lib.ctx);
            if (listener < 0)
                sb_error(errors, "seccomp: [Errno %d] seccomp_notify_fd failed", -listener);
        }
    }
    lib.release(lib.ctx);
    if (listener < 0)
        return -1;
    return start_supervisor(listener, errors);
}

int sb_signals_confined(void) {
    return kill(-1, 0) != 0 && errno == EPERM;
}
