/*
 * carry_tar.c - read the tar streams Docker's archive API gives and write
 * them out again under other names, entry by entry.
 *
 * A tar is a sequence of 512-byte blocks: a header, then the entry's data
 * padded to a block, then the next header; two zero blocks end it. Docker
 * writes POSIX (ustar + PAX) archives: a header of type 'x' before an entry
 * holds "len key=value\n" records for what ustar cannot say (long names,
 * sizes over 8 GiB, large ids, sub-second times, xattrs). GNU long names
 * ('L', 'K') are read too. Global headers ('g') are dropped.
 *
 * An entry is re-emitted from its own header block with only the name, the
 * link name and the size rewritten; every other field and every other PAX
 * record passes through unchanged, so the owner, mode, times, device
 * numbers and xattrs are exactly what Docker read. The reader holds one
 * header and its PAX records at a time (records are capped at 1 MiB), so a
 * stream of any size takes bounded memory.
 */
#include "util/xalloc.h"
#include "carry/carry_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"

#define PAX_MAX (1u << 20)
#define READ_BUF (64u * 1024)

struct carry_tar_reader {
    int fd;
    unsigned char buf[READ_BUF];
    size_t len, pos; /* unread bytes are buf[pos..len) */
    bool eof;
};

int carry_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t done = write(fd, p, n);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return -1;
        p += done;
        n -= (size_t)done;
    }
    return 0;
}

carry_tar_reader *carry_tar_reader_new(int fd)
{
    carry_tar_reader *r = xcalloc(1, sizeof(*r));
    r->fd = fd;
    return r;
}

void carry_tar_reader_free(carry_tar_reader *r)
{
    free(r);
}

void carry_tar_entry_clear(carry_tar_entry *e)
{
    free(e->name);
    free(e->linkname);
    free(e->pax);
    *e = (carry_tar_entry){0};
}

/* Refill the buffer; 0 at the end of input. */
static ssize_t reader_fill(carry_tar_reader *r)
{
    if (r->pos == r->len) {
        r->pos = r->len = 0;
    }
    if (r->eof)
        return 0;
    for (;;) {
        ssize_t n = read(r->fd, r->buf + r->len, sizeof(r->buf) - r->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            r->eof = true;
        if (n > 0)
            r->len += (size_t)n;
        return n;
    }
}

/* Exactly n bytes into out (NULL: skip them); -1 when the input ends first. */
static int reader_take(carry_tar_reader *r, void *out, size_t n, int out_fd)
{
    unsigned char *dst = out;
    while (n > 0) {
        if (r->pos == r->len) {
            ssize_t got = reader_fill(r);
            if (got <= 0)
                return -1;
        }
        size_t chunk = r->len - r->pos < n ? r->len - r->pos : n;
        if (dst) {
            memcpy(dst, r->buf + r->pos, chunk);
            dst += chunk;
        } else if (out_fd >= 0 && carry_write_all(out_fd, r->buf + r->pos, chunk) < 0) {
            return -2;
        }
        r->pos += chunk;
        n -= chunk;
    }
    return 0;
}

/* ---- Header fields ---- */

/* An octal field (spaces and NULs around it), or base-256 when the first
 * byte has its high bit set. */
static bool parse_number(const unsigned char *f, size_t len, uint64_t *out)
{
    if (f[0] & 0x80) {
        if (f[0] & 0x40)
            return false; /* negative */
        uint64_t v = f[0] & 0x3f;
        for (size_t i = 1; i < len; i++) {
            if (v >> 56)
                return false;
            v = (v << 8) | f[i];
        }
        *out = v;
        return true;
    }
    size_t i = 0;
    while (i < len && (f[i] == ' ' || f[i] == '\0'))
        i++;
    uint64_t v = 0;
    for (; i < len && f[i] >= '0' && f[i] <= '7'; i++)
        v = v * 8 + (uint64_t)(f[i] - '0');
    *out = v;
    return true;
}

static void format_octal(unsigned char *f, size_t len, uint64_t v)
{
    /* len-1 digits and a NUL */
    f[len - 1] = '\0';
    for (size_t i = len - 1; i-- > 0;) {
        f[i] = (unsigned char)('0' + (v & 7));
        v >>= 3;
    }
}

static bool checksum_ok(const unsigned char *h)
{
    uint64_t stored;
    if (!parse_number(h + 148, 8, &stored))
        return false;
    uint64_t unsigned_sum = 0;
    int64_t signed_sum = 0;
    for (size_t i = 0; i < CARRY_TAR_BLOCK; i++) {
        unsigned char c = (i >= 148 && i < 156) ? ' ' : h[i];
        unsigned_sum += c;
        signed_sum += (signed char)c;
    }
    return stored == unsigned_sum || (int64_t)stored == signed_sum;
}

static void set_checksum(unsigned char *h)
{
    memset(h + 148, ' ', 8);
    uint64_t sum = 0;
    for (size_t i = 0; i < CARRY_TAR_BLOCK; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06" PRIo64, sum);
    h[155] = ' ';
}

static char *field_string(const unsigned char *f, size_t len)
{
    return xstrndup((const char *)f, strnlen((const char *)f, len));
}

static bool is_zero_block(const unsigned char *h)
{
    for (size_t i = 0; i < CARRY_TAR_BLOCK; i++)
        if (h[i])
            return false;
    return true;
}

/* ---- PAX records ---- */

struct pending {
    char *path, *linkpath; /* from PAX or GNU long names */
    bool has_size;
    uint64_t size;
    char *records; /* the other PAX records, verbatim */
    size_t records_len;
};

static void pending_clear(struct pending *p)
{
    free(p->path);
    free(p->linkpath);
    free(p->records);
    *p = (struct pending){0};
}

static int pax_parse(struct pending *p, const char *data, size_t len, gb_err *err)
{
    size_t pos = 0;
    while (pos < len) {
        char *end;
        unsigned long rec_len = strtoul(data + pos, &end, 10);
        if (end == data + pos || *end != ' ' || rec_len == 0 || rec_len > len - pos ||
            data[pos + rec_len - 1] != '\n')
            return err_set(err, ERR_INTERNAL, "carrying the system disk: a malformed PAX header");
        const char *key = end + 1;
        const char *eq = memchr(key, '=', (size_t)(data + pos + rec_len - key));
        if (!eq)
            return err_set(err, ERR_INTERNAL, "carrying the system disk: a malformed PAX record");
        size_t key_len = (size_t)(eq - key);
        const char *value = eq + 1;
        size_t value_len = (size_t)(data + pos + rec_len - 1 - value);
        if (key_len == 4 && memcmp(key, "path", 4) == 0) {
            free(p->path);
            p->path = xstrndup(value, value_len);
        } else if (key_len == 8 && memcmp(key, "linkpath", 8) == 0) {
            free(p->linkpath);
            p->linkpath = xstrndup(value, value_len);
        } else if (key_len == 4 && memcmp(key, "size", 4) == 0) {
            p->has_size = true;
            p->size = strtoull(value, NULL, 10);
        } else {
            char *grown = xrealloc(p->records, p->records_len + rec_len);
            memcpy(grown + p->records_len, data + pos, rec_len);
            p->records = grown;
            p->records_len += rec_len;
        }
        pos += rec_len;
    }
    return 0;
}

/* Read the data of a meta entry ('x', 'L', 'K') of size n. */
static char *read_meta(carry_tar_reader *r, uint64_t n, gb_err *err)
{
    if (n > PAX_MAX) {
        err_set(err, ERR_INTERNAL, "carrying the system disk: a tar header of %" PRIu64 " bytes",
                n);
        return NULL;
    }
    size_t padded = (size_t)((n + CARRY_TAR_BLOCK - 1) / CARRY_TAR_BLOCK * CARRY_TAR_BLOCK);
    char *data = xmalloc(padded + 1);
    if (reader_take(r, data, padded, -1) < 0) {
        free(data);
        err_set(err, ERR_INTERNAL, "carrying the system disk: the archive ends inside a header");
        return NULL;
    }
    data[n] = '\0';
    return data;
}

static bool header_only_type(char t)
{
    return t == '1' || t == '2' || t == '3' || t == '4' || t == '5' || t == '6';
}

int carry_tar_next(carry_tar_reader *r, carry_tar_entry *e, gb_err *err)
{
    *e = (carry_tar_entry){0};
    struct pending p = {0};
    for (;;) {
        unsigned char h[CARRY_TAR_BLOCK];
        ssize_t got = r->pos == r->len ? reader_fill(r) : 1;
        if (got < 0) {
            pending_clear(&p);
            return err_set(err, ERR_INTERNAL, "carrying the system disk: reading the archive: %s",
                           strerror(errno));
        }
        if (got == 0) {
            bool pending = p.path || p.linkpath || p.records || p.has_size;
            pending_clear(&p);
            if (!pending)
                return 0; /* the input ends between entries: Docker's end blocks may be cut */
            return err_set(err, ERR_INTERNAL, "carrying the system disk: the archive is cut short");
        }
        if (reader_take(r, h, sizeof(h), -1) < 0) {
            pending_clear(&p);
            return err_set(err, ERR_INTERNAL, "carrying the system disk: the archive is cut short");
        }
        if (is_zero_block(h)) {
            pending_clear(&p);
            return 0;
        }
        if (!checksum_ok(h)) {
            pending_clear(&p);
            return err_set(err, ERR_INTERNAL,
                           "carrying the system disk: the archive has a corrupt header");
        }
        uint64_t size = 0;
        parse_number(h + 124, 12, &size);
        char type = (char)h[156];
        if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
            _cleanup_free_ char *data = read_meta(r, size, err);
            if (!data) {
                pending_clear(&p);
                return -1;
            }
            if (type == 'x' && pax_parse(&p, data, (size_t)size, err) < 0) {
                pending_clear(&p);
                return -1;
            }
            if (type == 'L') {
                free(p.path);
                p.path = xstrndup(data, strnlen(data, (size_t)size));
            } else if (type == 'K') {
                free(p.linkpath);
                p.linkpath = xstrndup(data, strnlen(data, (size_t)size));
            }
            continue;
        }
        memcpy(e->header, h, sizeof(h));
        e->type = (type == '\0' || type == '7') ? '0' : type;
        e->size = p.has_size ? p.size : size;
        if (header_only_type(e->type))
            e->size = 0;
        if (p.path) {
            e->name = steal_ptr(&p.path);
        } else {
            _cleanup_free_ char *name = field_string(h, 100);
            bool ustar = memcmp(h + 257, "ustar\0", 6) == 0;
            _cleanup_free_ char *prefix = ustar ? field_string(h + 345, 155) : NULL;
            if (prefix && prefix[0])
                e->name = xasprintf("%s/%s", prefix, name);
            else
                e->name = steal_ptr(&name);
        }
        e->linkname = p.linkpath ? steal_ptr(&p.linkpath) : field_string(h + 157, 100);
        e->pax = steal_ptr(&p.records);
        e->pax_len = p.records_len;
        pending_clear(&p);
        return 1;
    }
}

int carry_tar_data(carry_tar_reader *r, const carry_tar_entry *e, int out_fd, gb_err *err)
{
    uint64_t padded = (e->size + CARRY_TAR_BLOCK - 1) / CARRY_TAR_BLOCK * CARRY_TAR_BLOCK;
    uint64_t left = e->size;
    while (left > 0) {
        size_t chunk = left > (1u << 30) ? (1u << 30) : (size_t)left;
        int rc = reader_take(r, NULL, chunk, out_fd);
        if (rc == -2) {
            err_set(err, ERR_INTERNAL, "carrying the system disk: writing the stream: %s",
                    strerror(errno));
            return -2;
        }
        if (rc < 0)
            return err_set(err, ERR_INTERNAL,
                           "carrying the system disk: the archive ends inside '%s'", e->name);
        left -= chunk;
    }
    if (reader_take(r, NULL, (size_t)(padded - e->size), -1) < 0)
        return err_set(err, ERR_INTERNAL, "carrying the system disk: the archive ends inside '%s'",
                       e->name);
    return 0;
}

/* ---- Writing ---- */

static int write_failed(gb_err *err)
{
    return err_set(err, ERR_INTERNAL, "carrying the system disk: writing the stream: %s",
                   strerror(errno));
}

int carry_tar_pad(int fd, uint64_t size, gb_err *err)
{
    static const unsigned char zeros[CARRY_TAR_BLOCK];
    size_t rest = (size_t)(size % CARRY_TAR_BLOCK);
    if (rest && carry_write_all(fd, zeros, CARRY_TAR_BLOCK - rest) < 0)
        return write_failed(err);
    return 0;
}

/* Append "len key=value\n" to buf; len counts itself. */
static void pax_append(char **buf, size_t *len, const char *key, const char *value)
{
    size_t body = strlen(key) + strlen(value) + 3; /* ' ', '=', '\n' */
    size_t total = body + 1;
    char digits[24];
    while (total != body + (size_t)snprintf(digits, sizeof(digits), "%zu", total))
        total = body + (size_t)snprintf(digits, sizeof(digits), "%zu", total);
    *buf = xrealloc(*buf, *len + total + 1);
    snprintf(*buf + *len, total + 1, "%zu %s=%s\n", total, key, value);
    *len += total;
}

int carry_tar_write_header(int fd, const carry_tar_entry *e, const char *name, const char *linkname,
                           gb_err *err)
{
    if (!linkname)
        linkname = e->linkname;
    unsigned char h[CARRY_TAR_BLOCK];
    memcpy(h, e->header, sizeof(h));
    const uint64_t ustar_size_max = 077777777777ULL;

    _cleanup_free_ char *pax = NULL;
    size_t pax_len = 0;
    bool long_name = strlen(name) > 100, long_link = strlen(linkname) > 100;
    bool big = e->size > ustar_size_max;
    char size_text[24];
    snprintf(size_text, sizeof(size_text), "%" PRIu64, e->size);
    if (long_name)
        pax_append(&pax, &pax_len, "path", name);
    if (long_link)
        pax_append(&pax, &pax_len, "linkpath", linkname);
    if (big)
        pax_append(&pax, &pax_len, "size", size_text);
    if (e->pax_len) {
        char *grown = xrealloc(pax, pax_len + e->pax_len);
        memcpy(grown + pax_len, e->pax, e->pax_len);
        pax = grown;
        pax_len += e->pax_len;
    }

    if (pax_len) {
        unsigned char x[CARRY_TAR_BLOCK] = {0};
        snprintf((char *)x, 100, "PaxHeaders/%.80s", name);
        memcpy(x + 100, "0000644", 8);
        memcpy(x + 108, "0000000", 8);
        memcpy(x + 116, "0000000", 8);
        format_octal(x + 124, 12, pax_len);
        memcpy(x + 136, e->header + 136, 12); /* the entry's mtime */
        x[156] = 'x';
        memcpy(x + 257,
               "ustar\0"
               "00",
               8);
        set_checksum(x);
        if (carry_write_all(fd, x, sizeof(x)) < 0 || carry_write_all(fd, pax, pax_len) < 0 ||
            carry_tar_pad(fd, pax_len, err) < 0)
            return write_failed(err);
    }

    memset(h, 0, 100);
    memcpy(h, name, long_name ? 100 : strlen(name));
    memset(h + 157, 0, 100);
    memcpy(h + 157, linkname, long_link ? 100 : strlen(linkname));
    format_octal(h + 124, 12, big ? 0 : e->size);
    memcpy(h + 257,
           "ustar\0"
           "00",
           8);
    memset(h + 345, 0, 155); /* the name is whole in its field or in PAX */
    set_checksum(h);
    if (carry_write_all(fd, h, sizeof(h)) < 0)
        return write_failed(err);
    return 0;
}

int carry_tar_write_placeholder(int fd, const char *name, gb_err *err)
{
    carry_tar_entry e = {.type = '0', .size = 0, .linkname = ""};
    unsigned char *h = e.header;
    memcpy(h + 100, "0000600", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    format_octal(h + 136, 12, 0);
    h[156] = '0';
    return carry_tar_write_header(fd, &e, name, NULL, err);
}

int carry_tar_write_end(int fd, gb_err *err)
{
    static const unsigned char zeros[2 * CARRY_TAR_BLOCK];
    if (carry_write_all(fd, zeros, sizeof(zeros)) < 0)
        return write_failed(err);
    return 0;
}

void carry_pipe_widen(int fd)
{
    (void)fcntl(fd, F_SETPIPE_SZ, 1024 * 1024);
}

/* ---- Cutting a stream at its last whole entry (a move resumed) ---- */

bool carry_tar_block_starts_entry(const unsigned char *block)
{
    return is_zero_block(block) || checksum_ok(block);
}

/* Types whose header only describes the entry that follows. */
static bool tar_prefix_type(char t)
{
    return t == 'x' || t == 'g' || t == 'L' || t == 'K';
}

#define RELAY_BUF (1u << 20)

/* The relay's state: what of the stream went on, and where the last whole
 * entry ended. Headers that only describe the next entry (PAX, GNU long
 * names) are held back with their data until that entry's header came, so
 * a cut leaves at most one entry's data unfinished. */
struct carry_relay {
    int out_fd;
    bool failed;
    unsigned char header[CARRY_TAR_BLOCK];
    size_t hlen;    /* bytes of the header block being read */
    uint64_t left;  /* data and padding of the current entry still to come */
    bool in_prefix; /* the current data belongs to a held-back header */
    bool in_data;   /* inside a real entry's data */
    char *held;     /* held-back headers and their data */
    size_t held_len;
    uint64_t offset; /* bytes read so far */
    uint64_t whole;  /* end of the last whole entry */
    bool ended;      /* the end blocks came (or a block no tar reader follows) */
    /* The entry whose data is under way: its headers (held-back ones
     * included) from `whole` on, as carry_tar_head_hash sums them. */
    uint64_t head_len, head_hash;
};

uint64_t carry_tar_head_hash(uint64_t hash, const void *data, size_t n)
{
    /* FNV-1a, 64 bits: only telling one entry's headers from another's. */
    const unsigned char *p = data;
    if (hash == 0)
        hash = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) {
        hash ^= p[i];
        hash *= 1099511628211ULL;
    }
    return hash;
}

static void relay_out(struct carry_relay *r, const void *p, size_t n)
{
    if (!r->failed && carry_write_all(r->out_fd, p, n) < 0)
        r->failed = true;
}

static void relay_hold(struct carry_relay *r, const void *p, size_t n)
{
    if (r->held_len + n > PAX_MAX + 4 * CARRY_TAR_BLOCK) { /* no resume point: pass it on */
        relay_out(r, r->held, r->held_len);
        relay_out(r, p, n);
        r->held_len = 0;
        return;
    }
    r->held = xrealloc(r->held, r->held_len + n);
    memcpy(r->held + r->held_len, p, n);
    r->held_len += n;
}

static void relay_header(struct carry_relay *r)
{
    if (is_zero_block(r->header)) {
        r->ended = true;
        relay_out(r, r->held, r->held_len);
        r->held_len = 0;
        relay_out(r, r->header, CARRY_TAR_BLOCK);
        return;
    }
    uint64_t size = 0;
    char type = (char)r->header[156];
    if (!checksum_ok(r->header) || !parse_number(r->header + 124, 12, &size)) {
        r->ended = true; /* not a tar this follows: everything passes, no resume point */
        relay_out(r, r->held, r->held_len);
        r->held_len = 0;
        relay_out(r, r->header, CARRY_TAR_BLOCK);
        return;
    }
    if (type == '1' || type == '2' || type == '3' || type == '4' || type == '5' || type == '6')
        size = 0; /* entries that carry no data, whatever their size field says */
    r->left = (size + CARRY_TAR_BLOCK - 1) / CARRY_TAR_BLOCK * CARRY_TAR_BLOCK;
    r->in_prefix = tar_prefix_type(type);
    if (r->in_prefix) {
        relay_hold(r, r->header, CARRY_TAR_BLOCK);
        return;
    }
    relay_out(r, r->held, r->held_len);
    r->head_len = r->held_len + CARRY_TAR_BLOCK;
    r->head_hash = carry_tar_head_hash(carry_tar_head_hash(0, r->held, r->held_len), r->header,
                                       CARRY_TAR_BLOCK);
    if (r->whole + r->head_len != r->offset)
        r->head_len = 0; /* held-back headers passed on already: no head to tell */
    r->held_len = 0;
    relay_out(r, r->header, CARRY_TAR_BLOCK);
    r->in_data = r->left > 0;
    if (!r->in_data)
        r->whole = r->offset;
}

static void relay_feed(struct carry_relay *r, const unsigned char *p, size_t n)
{
    size_t pos = 0;
    while (pos < n) {
        if (r->ended) {
            relay_out(r, p + pos, n - pos);
            r->offset += n - pos;
            return;
        }
        if (r->left > 0) {
            size_t take = n - pos < r->left ? n - pos : (size_t)r->left;
            if (r->in_prefix)
                relay_hold(r, p + pos, take);
            else
                relay_out(r, p + pos, take);
            pos += take;
            r->offset += take;
            r->left -= take;
            if (r->left == 0 && !r->in_prefix) {
                r->in_data = false;
                r->whole = r->offset;
            }
            continue;
        }
        size_t take = CARRY_TAR_BLOCK - r->hlen;
        if (take > n - pos)
            take = n - pos;
        memcpy(r->header + r->hlen, p + pos, take);
        r->hlen += take;
        pos += take;
        r->offset += take;
        if (r->hlen == CARRY_TAR_BLOCK) {
            r->hlen = 0;
            relay_header(r);
        }
    }
}

carry_relay *carry_relay_new(int out_fd)
{
    carry_relay *r = xcalloc(1, sizeof(*r));
    r->out_fd = out_fd;
    return r;
}

int carry_relay_feed(carry_relay *r, const void *data, size_t n)
{
    relay_feed(r, data, n);
    if (r->failed)
        errno = EPIPE;
    return r->failed ? -1 : 0;
}

bool carry_relay_head(const carry_relay *r, uint64_t *len, uint64_t *hash)
{
    if (r->ended || !r->in_data || r->head_len == 0)
        return false;
    *len = r->head_len;
    *hash = r->head_hash;
    return true;
}

int carry_relay_end(carry_relay *r, uint64_t *whole, bool *complete, gb_err *err)
{
    *whole = r->whole;
    *complete = r->ended;
    if (!r->ended) {
        /* Cut off: the entry under way completed with zeros (the resumed
         * stream writes it again whole), held-back headers and a partial
         * header dropped, then the end blocks: what came whole is
         * extracted. */
        unsigned char *zeros = xcalloc(1, RELAY_BUF);
        uint64_t pad = r->in_data ? r->left : 0;
        while (pad > 0 && !r->failed) {
            size_t w = pad < RELAY_BUF ? (size_t)pad : RELAY_BUF;
            relay_out(r, zeros, w);
            pad -= w;
        }
        relay_out(r, zeros, 2 * CARRY_TAR_BLOCK);
        free(zeros);
    }
    bool failed = r->failed;
    free(r->held);
    free(r);
    if (failed)
        return err_set(err, ERR_INTERNAL,
                       "extracting a move's data: the extraction stopped reading");
    return 0;
}

int carry_tar_relay(int in_fd, int out_fd, uint64_t *whole, bool *complete, gb_err *err)
{
    carry_relay *r = carry_relay_new(out_fd);
    unsigned char *buf = xmalloc(RELAY_BUF);
    for (;;) {
        ssize_t n = read(in_fd, buf, RELAY_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        relay_feed(r, buf, (size_t)n);
    }
    free(buf);
    return carry_relay_end(r, whole, complete, err);
}
