/*
 * limits.c - parsing and re-reading the limits file (format in limits.h).
 * Allocation paths call gpucuda_limits_refresh, so it costs one fstat when
 * nothing changed.
 */
#include "glibc_compat.h" /* first: binds glibc versions (see there) */
#include "limits.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int gpucuda_uuid_parse(const char *s, size_t len, unsigned char out[16])
{
    /* 4 prefix + 32 digits + 4 dashes */
    if (len != 40 || (strncmp(s, "GPU-", 4) != 0 && strncmp(s, "MIG-", 4) != 0))
        return -1;
    static const int dash_at[] = {8, 13, 18, 23}; /* offsets after the prefix */
    const char *p = s + 4;
    int nbytes = 0, d = 0;
    for (int i = 0; i < 36;) {
        if (d < 4 && i == dash_at[d]) {
            if (p[i] != '-')
                return -1;
            d++;
            i++;
            continue;
        }
        int hi = hex_digit(p[i]), lo = hex_digit(p[i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[nbytes++] = (unsigned char)(hi << 4 | lo);
        i += 2;
    }
    return nbytes == 16 ? 0 : -1;
}

static const char *skip_blank(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    return p;
}

static const char *field_end(const char *p, const char *end)
{
    while (p < end && *p != ' ' && *p != '\t' && *p != '\r')
        p++;
    return p;
}

int gpucuda_limits_parse(const char *text, gpucuda_limits *out, char *err, size_t errlen)
{
    gpucuda_limits l = {0};
    int lineno = 0;
    for (const char *line = text; *line;) {
        const char *eol = strchr(line, '\n');
        const char *end = eol ? eol : line + strlen(line);
        lineno++;
        const char *p = skip_blank(line, end);
        if (p < end && *p != '#') {
            const char *uuid_end = field_end(p, end);
            unsigned char uuid[16];
            if (gpucuda_uuid_parse(p, (size_t)(uuid_end - p), uuid) != 0) {
                snprintf(err, errlen, "line %d: expected a GPU-... or MIG-... UUID", lineno);
                return -1;
            }
            p = skip_blank(uuid_end, end);
            const char *mib_end = field_end(p, end);
            uint64_t mib = 0;
            const char *q = p;
            for (; q < mib_end && *q >= '0' && *q <= '9'; q++) {
                if (mib > (UINT64_MAX >> 20) / 10) {
                    q = p; /* overflow: reported below */
                    break;
                }
                mib = mib * 10 + (uint64_t)(*q - '0');
            }
            if (q == p || q != mib_end || mib == 0 || mib > (UINT64_MAX >> 20)) {
                snprintf(err, errlen,
                         "line %d: expected the share in MiB (1 or more) after the UUID", lineno);
                return -1;
            }
            /* KEY=VALUE fields after the share: cores=P; others ignored. */
            unsigned cores = 0;
            for (p = skip_blank(mib_end, end); p < end; p = skip_blank(field_end(p, end), end)) {
                const char *fe = field_end(p, end);
                if (!memchr(p, '=', (size_t)(fe - p))) {
                    snprintf(err, errlen, "line %d: expected KEY=VALUE after the share", lineno);
                    return -1;
                }
                if (fe - p >= 6 && strncmp(p, "cores=", 6) == 0) {
                    unsigned v = 0;
                    const char *d = p + 6;
                    for (; d < fe && *d >= '0' && *d <= '9' && v <= 100; d++)
                        v = v * 10 + (unsigned)(*d - '0');
                    if (d != fe || v < 1 || v > 100) {
                        snprintf(err, errlen, "line %d: cores= takes a percent, 1 to 100", lineno);
                        return -1;
                    }
                    cores = v == 100 ? 0 : v;
                }
            }
            if (gpucuda_limits_find(&l, uuid)) {
                snprintf(err, errlen, "line %d: the card is named twice", lineno);
                return -1;
            }
            if (l.n == GPUCUDA_MAX_DEVICES) {
                snprintf(err, errlen, "line %d: more than %d cards", lineno, GPUCUDA_MAX_DEVICES);
                return -1;
            }
            memcpy(l.dev[l.n].uuid, uuid, 16);
            l.dev[l.n].memory_bytes = mib << 20;
            l.dev[l.n].cores = cores;
            l.n++;
        }
        line = eol ? eol + 1 : end;
    }
    *out = l;
    return 0;
}

const gpucuda_limit *gpucuda_limits_find(const gpucuda_limits *l, const unsigned char uuid[16])
{
    for (int i = 0; i < l->n; i++)
        if (memcmp(l->dev[i].uuid, uuid, 16) == 0)
            return &l->dev[i];
    return NULL;
}

char *gpucuda_read_small_file(int fd)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        ssize_t n = pread(fd, buf + len, cap - len, (off_t)len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free(buf);
            buf = NULL;
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len == cap) {
            if (cap >= 65536) {
                free(buf);
                buf = NULL;
                break;
            }
            cap *= 2;
            char *bigger = realloc(buf, cap + 1);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    if (buf)
        buf[len] = '\0';
    return buf;
}

static bool same_version(const gpucuda_limits_file *f, const struct stat *st)
{
    return f->ino == st->st_ino && f->dev == st->st_dev && f->size == st->st_size &&
           f->mtime.tv_sec == st->st_mtim.tv_sec && f->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* No file: nothing is limited. */
static bool limits_clear(gpucuda_limits_file *f)
{
    if (f->limits.n == 0)
        return false;
    f->limits.n = 0;
    f->generation++;
    return true;
}

bool gpucuda_limits_refresh(gpucuda_limits_file *f)
{
    struct stat st;
    if (f->fd > 0) {
        /* The open file still linked and unchanged: nothing to do. A rename
         * over it leaves it with no link. */
        if (gpucuda_fstat(f->fd, &st) == 0 && st.st_nlink > 0 && same_version(f, &st))
            return false;
        /* Replaced, removed or rewritten; or the program closed the
         * descriptor (and it may name another file now: close it only when
         * it is still ours). */
        if (gpucuda_fstat(f->fd, &st) == 0 && st.st_ino == f->ino && st.st_dev == f->dev)
            close(f->fd);
        f->fd = 0;
    }
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return limits_clear(f);
    if (gpucuda_fstat(fd, &st) != 0) {
        close(fd);
        return false;
    }
    if (fd == 0) {
        /* 0 means "none" here; keep the file on another descriptor. */
        int other = fcntl(fd, F_DUPFD_CLOEXEC, 1);
        close(fd);
        if (other < 0)
            return false;
        fd = other;
    }
    f->fd = fd;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->size = st.st_size;
    f->mtime = st.st_mtim;

    char *text = gpucuda_read_small_file(fd);
    if (!text) {
        fprintf(stderr, "libgpubox-cuda: cannot read %s (%s); keeping the limits read before\n",
                f->path, strerror(errno));
        return false;
    }
    gpucuda_limits l;
    char err[160];
    int rc = gpucuda_limits_parse(text, &l, err, sizeof(err));
    free(text);
    if (rc != 0) {
        fprintf(stderr, "libgpubox-cuda: %s: %s; keeping the limits read before\n", f->path, err);
        return false;
    }
    if (l.n == f->limits.n && memcmp(l.dev, f->limits.dev, (size_t)l.n * sizeof(l.dev[0])) == 0)
        return false;
    f->limits = l;
    f->generation++;
    return true;
}
