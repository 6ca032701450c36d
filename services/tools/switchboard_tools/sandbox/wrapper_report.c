/* The measurement and report of the compiled wrapper: inner.measure and inner.missing_layers,
 * observed the same way (the same files, syscalls and probes), written as the same JSON. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wrapper_report.h"

static ssize_t read_file(const char *path, char *buf, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t total = 0;
    ssize_t n;
    while (total < size - 1 && (n = read(fd, buf + total, size - 1 - total)) > 0)
        total += (size_t)n;
    close(fd);
    buf[total] = '\0';
    return (ssize_t)total;
}

/* /proc/self/status "Key:\tvalue", the value stripped; "" when absent. */
static void status_get(const char *status, const char *key, char *out, size_t size) {
    size_t klen = strlen(key);
    out[0] = '\0';
    for (const char *line = status; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > klen + 1 && !strncmp(line, key, klen) && line[klen] == ':' &&
            line[klen + 1] == '\t') {
            const char *v = line + klen + 2, *stop = line + len;
            while (v < stop && (*v == ' ' || *v == '\t'))
                v++;
            while (stop > v && (stop[-1] == ' ' || stop[-1] == '\t' || stop[-1] == '\r'))
                stop--;
            snprintf(out, size, "%.*s", (int)(stop - v), v);
            return;
        }
        line += len + (end != NULL);
    }
}

static int ns_differs(const char *kind, uint64_t ino) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/self/ns/%s", kind);
    return stat(path, &st) == 0 && (uint64_t)st.st_ino != ino;
}

/* inner.cgroup_view().get(controller): the path of the last line naming it; NULL if none. */
static const char *cgroup_path(const char *view, const char *controller, char *out, size_t size) {
    const char *found = NULL;
    for (const char *line = view; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        if (c2 != NULL) {
            size_t clen = strlen(controller);
            for (const char *c = c1 + 1; c <= c2;) { /* controllers, comma-separated ("" = v2) */
                const char *stop = memchr(c, ',', (size_t)(c2 - c));
                stop = stop ? stop : c2;
                if ((size_t)(stop - c) == clen && !strncmp(c, controller, clen)) {
                    snprintf(out, size, "%.*s", (int)(len - (size_t)(c2 + 1 - line)), c2 + 1);
                    found = out;
                }
                c = stop + 1;
            }
        }
        line += len + (end != NULL);
    }
    return found;
}

static int in_cgroup(const struct sb_config *cfg) {
    static char view[16384];
    char path[4096];
    if (cfg->n_cgroup == 0)
        return 0;
    if (read_file("/proc/self/cgroup", view, sizeof view) < 0)
        view[0] = '\0';
    int own_ns = cfg->has_host_cgroupns && ns_differs("cgroup", cfg->host_cgroupns);
    for (int i = 0; i < cfg->n_cgroup; i++) {
        const char *got = cgroup_path(view, cfg->cgroup[i].name, path, sizeof path);
        if (got == NULL || (strcmp(got, cfg->cgroup[i].value) && !(own_ns && !strcmp(got, "/"))))
            return 0;
    }
    return 1;
}

/* connect() to 127.0.0.1:9 within 0.2 s: refused with EACCES/EPERM only by Landlock (without it
 * ECONNREFUSED, or it connects: either way the network is reachable). */
static int tcp_connect_denied(void) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return 1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(9)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int err = 0;
    if (connect(s, (struct sockaddr *)&addr, sizeof addr) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            struct pollfd p = {s, POLLOUT, 0};
            socklen_t len = sizeof err;
            err = 0;
            if (poll(&p, 1, 200) == 1)
                getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
        }
    }
    close(s);
    return err == EACCES || err == EPERM;
}

void sb_measure(const struct sb_config *cfg, int landlock_abi_used, struct sb_report *r) {
    static char status[16384];
    char value[64];
    memset(r, 0, sizeof *r);
    if (read_file("/proc/self/status", status, sizeof status) < 0)
        status[0] = '\0';
    int all = cfg->n_ns > 0;
    for (int i = 0; i < cfg->n_ns; i++) {
        r->ns[i] = ns_differs(cfg->ns[i].kind, cfg->ns[i].ino);
        all = all && r->ns[i];
    }
    r->namespaces = all;
    int unshare_denied = unshare(0) != 0;
    status_get(status, "Seccomp", value, sizeof value);
    r->seccomp_mode = atoi(value);
    r->signals_confined = sb_signals_confined();
    r->seccomp = r->seccomp_mode == 2 && unshare_denied && r->signals_confined;
    int sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    r->inet_socket_denied = sock < 0;
    if (sock >= 0)
        close(sock);
    r->tcp_connect_denied = r->inet_socket_denied || tcp_connect_denied();
    r->net_namespace = cfg->has_host_net && ns_differs("net", cfg->host_net);
    r->network = !(r->tcp_connect_denied || r->net_namespace);
    static const int which[6] = {RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_NPROC,
                                 RLIMIT_CORE};
    for (int i = 0; i < 6; i++) {
        struct rlimit limit = {RLIM_INFINITY, RLIM_INFINITY};
        getrlimit(which[i], &limit);
        r->rlimits[i] = limit.rlim_cur == RLIM_INFINITY ? -1 : (int64_t)limit.rlim_cur;
    }
    r->uid = getuid();
    r->gid = getgid();
    status_get(status, "NoNewPrivs", value, sizeof value);
    r->no_new_privs = !strcmp(value, "1");
    status_get(status, "CapEff", r->caps_effective, sizeof r->caps_effective);
    r->landlock_abi = landlock_abi_used;
    if (landlock_abi_used > 0) {
        int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r->landlock = fd < 0;
        if (fd >= 0)
            close(fd);
    }
    r->cgroup = in_cgroup(cfg);
}

/* report.get(name) as a truth value, for the layers a profile can require. */
static int truthy(const struct sb_report *r, const char *name) {
    if (!strcmp(name, "seccomp"))
        return r->seccomp;
    if (!strcmp(name, "landlock"))
        return r->landlock;
    if (!strcmp(name, "namespaces"))
        return r->namespaces;
    if (!strcmp(name, "no_new_privs"))
        return r->no_new_privs;
    if (!strcmp(name, "cgroup"))
        return r->cgroup;
    if (!strcmp(name, "network"))
        return r->network;
    if (!strcmp(name, "signals_confined"))
        return r->signals_confined;
    return !strcmp(name, "measured");
}

struct out {
    char data[65536];
    size_t len;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(o->data + o->len, sizeof o->data - o->len, fmt, args);
    va_end(args);
    if (n > 0)
        o->len = o->len + (size_t)n < sizeof o->data ? o->len + (size_t)n : sizeof o->data - 1;
}

/* Whether ``s`` is valid UTF-8 (then it goes into the JSON as it is, as Python's json.dumps
 * would give the same text): lead byte, continuation bytes, no overlong or surrogate forms. */
static int valid_utf8(const unsigned char *s) {
    while (*s) {
        int extra = *s < 0x80 ? 0 : (*s & 0xE0) == 0xC0 ? 1 : (*s & 0xF0) == 0xE0 ? 2
                  : (*s & 0xF8) == 0xF0 ? 3 : -1;
        if (extra < 0 || (*s == 0xC0 || *s == 0xC1) || *s > 0xF4)
            return 0;
        if ((*s == 0xE0 && (s[1] & 0xE0) == 0x80) || (*s == 0xED && s[1] >= 0xA0) ||
            (*s == 0xF0 && s[1] < 0x90) || (*s == 0xF4 && s[1] >= 0x90))
            return 0;
        for (int i = 1; i <= extra; i++)
            if ((s[i] & 0xC0) != 0x80)
                return 0;
        s += 1 + extra;
    }
    return 1;
}

static void put_string(struct out *o, const char *s) {
    int raw = valid_utf8((const unsigned char *)s);
    put(o, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            put(o, "\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f || (*c >= 0x80 && !raw))
            put(o, "\\u%04x", *c); /* not UTF-8: each byte as a code point, still valid JSON */
        else
            put(o, "%c", *c);
    }
    put(o, "\"");
}

static const char *json_bool(int value) {
    return value ? "true" : "false";
}

int sb_write_report(const struct sb_config *cfg, const struct sb_report *r,
                    const struct sb_errors *errors) {
    static struct out o;
    static const char *const limits[6] = {"cpu", "as", "fsize", "nofile", "nproc", "core"};
    put(&o, "{\"measured\": true, \"uid\": %u, \"gid\": %u, \"no_new_privs\": %s, ", r->uid, r->gid,
        json_bool(r->no_new_privs));
    put(&o, "\"caps_effective\": ");
    put_string(&o, r->caps_effective);
    put(&o, ", \"seccomp\": %s, \"seccomp_mode\": %d, \"signals_confined\": %s, ",
        json_bool(r->seccomp), r->seccomp_mode, json_bool(r->signals_confined));
    put(&o, "\"landlock\": %s, \"landlock_abi\": %d, \"namespaces\": %s, \"ns\": {",
        json_bool(r->landlock), r->landlock_abi, json_bool(r->namespaces));
    for (int i = 0; i < cfg->n_ns; i++) {
        put(&o, i ? ", " : "");
        put_string(&o, cfg->ns[i].kind);
        put(&o, ": %s", json_bool(r->ns[i]));
    }
    put(&o, "}, \"cgroup\": %s, \"network\": %s, \"network_checks\": {", json_bool(r->cgroup),
        json_bool(r->network));
    put(&o, "\"inet_socket_denied\": %s, \"tcp_connect_denied\": %s, \"net_namespace\": %s}, ",
        json_bool(r->inet_socket_denied), json_bool(r->tcp_connect_denied),
        json_bool(r->net_namespace));
    put(&o, "\"rlimits\": {");
    for (int i = 0; i < 6; i++) {
        if (r->rlimits[i] < 0)
            put(&o, "%s\"%s\": null", i ? ", " : "", limits[i]);
        else
            put(&o, "%s\"%s\": %lld", i ? ", " : "", limits[i], (long long)r->rlimits[i]);
    }
    put(&o, "}, \"missing\": [");
    int missing = 0;
    for (int i = 0; i < cfg->n_require; i++)
        if (!truthy(r, cfg->require[i])) {
            put(&o, missing++ ? ", " : "");
            put_string(&o, cfg->require[i]);
        }
    for (int i = 0; i < cfg->n_require_any; i++) {
        char group[256];
        snprintf(group, sizeof group, "%s", cfg->require_any[i]);
        int any = 0;
        for (char *save = NULL, *layer = strtok_r(group, "|", &save); layer;
             layer = strtok_r(NULL, "|", &save))
            any = any || truthy(r, layer);
        if (!any) {
            put(&o, missing++ ? ", " : "");
            put_string(&o, cfg->require_any[i]);
        }
    }
    if (!cfg->network && r->network) {
        put(&o, missing++ ? ", " : "");
        put_string(&o, "network_isolation");
    }
    put(&o, "], \"errors\": [");
    for (int i = 0; i < errors->count; i++) {
        put(&o, i ? ", " : "");
        put_string(&o, errors->text[i]);
    }
    put(&o, "], \"ok\": %s}", json_bool(missing == 0));
    for (size_t done = 0; done < o.len;) {
        ssize_t n = write(cfg->report_fd, o.data + done, o.len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    close(cfg->report_fd);
    if (missing) {
        char line[1024] = "sandbox: refused, layers not in force: ";
        size_t len = strlen(line);
        /* the names again, comma-separated: taken from the JSON just written */
        const char *list = strstr(o.data, "\"missing\": [") + 12;
        for (const char *c = list; *c && *c != ']' && len < sizeof line - 2; c++)
            if (*c != '"')
                line[len++] = *c;
        line[len++] = '\n';
        if (write(2, line, len) < 0) {
        }
    }
    return missing != 0;
}
