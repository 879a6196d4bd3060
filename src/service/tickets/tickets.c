/*
 * tickets.c - the table of live tickets (tickets.h).
 *
 * A small array under one mutex: tickets are few (a browser asks for one
 * as it opens a terminal or a service) and live seconds, so a linear scan
 * that drops expired ones as it goes is all the structure they need. The
 * table keeps each ticket's SHA-256, not the ticket, as the user table does
 * for tokens, and compares digests in constant time.
 */
#include "service/tickets/tickets.h"

#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "util/token.h"

typedef struct ticket_slot {
    bool used;
    char digest[TOKEN_DIGEST_HEX];
    char purpose[128];
    char object[256];
    caller who;
    time_t expires; /* CLOCK_MONOTONIC seconds */
} ticket_slot;

static pthread_mutex_t tickets_lock = PTHREAD_MUTEX_INITIALIZER;
static ticket_slot tickets_table[TICKET_MAX_LIVE];

static time_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static bool digest_equal(const char *a, const char *b)
{
    unsigned char diff = 0;
    for (size_t i = 0; i < TOKEN_DIGEST_HEX; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

static int random_hex(char out[TICKET_SIZE], gb_err *err)
{
    unsigned char raw[TICKET_LEN / 2];
    size_t got = 0;
    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n <= 0)
            return err_set(err, ERR_INTERNAL, "making a ticket: the kernel gave no randomness");
        got += (size_t)n;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof(raw); i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[TICKET_LEN] = '\0';
    token_wipe(raw, sizeof(raw));
    return 0;
}

int tickets_issue(const caller *who, const char *purpose, const char *object, int ttl_s,
                  char out[TICKET_SIZE], gb_err *err)
{
    if (!who || !purpose || !object || strlen(purpose) >= sizeof(((ticket_slot *)0)->purpose) ||
        strlen(object) >= sizeof(((ticket_slot *)0)->object))
        return err_set(err, ERR_INVALID_PARAMS, "a ticket needs a caller, a purpose and an object");
    if (random_hex(out, err) != 0)
        return -1;
    char digest[TOKEN_DIGEST_HEX];
    token_digest(out, TICKET_LEN, digest);

    time_t now = now_s();
    pthread_mutex_lock(&tickets_lock);
    ticket_slot *free_slot = NULL;
    int mine = 0;
    for (size_t i = 0; i < TICKET_MAX_LIVE; i++) {
        ticket_slot *s = &tickets_table[i];
        if (s->used && s->expires <= now)
            s->used = false;
        if (!s->used) {
            if (!free_slot)
                free_slot = s;
        } else if (strcmp(s->who.name, who->name) == 0) {
            mine++;
        }
    }
    if (!free_slot || mine >= TICKET_MAX_PER_USER) {
        pthread_mutex_unlock(&tickets_lock);
        token_wipe(out, TICKET_SIZE);
        out[0] = '\0';
        return err_set(err, ERR_QUOTA_EXCEEDED,
                       "too many unused tickets for '%s'; use or let them expire (%d s) first",
                       who->name, TICKET_TTL_S);
    }
    free_slot->used = true;
    memcpy(free_slot->digest, digest, sizeof(digest));
    strcpy(free_slot->purpose, purpose);
    strcpy(free_slot->object, object);
    free_slot->who = *who;
    free_slot->expires = now + (ttl_s > 0 ? ttl_s : TICKET_TTL_S);
    pthread_mutex_unlock(&tickets_lock);
    return 0;
}

bool tickets_redeem(const char *ticket, const char *purpose, const char *object, caller *who)
{
    if (!ticket || strlen(ticket) != TICKET_LEN || !purpose || !object)
        return false;
    char digest[TOKEN_DIGEST_HEX];
    token_digest(ticket, TICKET_LEN, digest);
    time_t now = now_s();
    bool ok = false;
    pthread_mutex_lock(&tickets_lock);
    for (size_t i = 0; i < TICKET_MAX_LIVE; i++) {
        ticket_slot *s = &tickets_table[i];
        if (!s->used || !digest_equal(s->digest, digest))
            continue;
        ok = s->expires > now && strcmp(s->purpose, purpose) == 0 && strcmp(s->object, object) == 0;
        if (ok && who)
            *who = s->who;
        memset(s, 0, sizeof(*s));
        break;
    }
    pthread_mutex_unlock(&tickets_lock);
    return ok;
}

void tickets_reset(void)
{
    pthread_mutex_lock(&tickets_lock);
    memset(tickets_table, 0, sizeof(tickets_table));
    pthread_mutex_unlock(&tickets_lock);
}
