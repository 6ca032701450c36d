/* The configuration of one call as the compiled wrapper reads it, and what it measures (the
 * fields of inner.measure's report, same names). */
#ifndef SB_WRAPPER_REPORT_H
#define SB_WRAPPER_REPORT_H

#include <stdint.h>

#include "wrapper.h"

#define SB_MAX_ITEMS 128
#define SB_MAX_NS 16

enum { RULE_RO, RULE_RW, RULE_DEV };

struct sb_rule {
    int kind;
    const char *path;
    int fd; /* >= 0: a descriptor the executor passed (rwfd=) */
};

struct sb_pair {
    const char *name, *value;
};

struct sb_config {
    int report_fd, seccomp, landlock, network;
    struct sb_rule rules[SB_MAX_ITEMS];
    int n_rules;
    const char *require[SB_MAX_ITEMS];
    int n_require;
    const char *require_any[SB_MAX_ITEMS]; /* "a|b", sorted by the executor */
    int n_require_any;
    struct sb_pair cgroup[SB_MAX_ITEMS];
    int n_cgroup;
    struct {
        const char *kind;
        uint64_t ino;
    } ns[SB_MAX_NS];
    int n_ns;
    int has_host_cgroupns, has_host_net;
    uint64_t host_cgroupns, host_net, nproc;
};

struct sb_report {
    unsigned uid, gid;
    int no_new_privs, seccomp, seccomp_mode, signals_confined, landlock, landlock_abi;
    int namespaces, ns[SB_MAX_NS], cgroup, network;
    int inet_socket_denied, tcp_connect_denied, net_namespace;
    char caps_effective[64];
    int64_t rlimits[6]; /* cpu, as, fsize, nofile, nproc, core; -1: unlimited (null) */
};

int sb_landlock_abi(void);

/* inner.measure: what is in force in this process right now. */
void sb_measure(const struct sb_config *cfg, int landlock_abi_used, struct sb_report *report);

/* Write the JSON report (with inner.missing_layers' "missing", "errors" and "ok") to the report
 * fd and close it; returns 1 when a required layer is missing (the command must not run). */
int sb_write_report(const struct sb_config *cfg, const struct sb_report *report,
                    const struct sb_errors *errors);

#endif
