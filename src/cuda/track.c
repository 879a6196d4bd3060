/*
 * track.c - the allocation table (track.h): open addressing with linear
 * probing and backward-shift deletion, grown to keep it at most half full.
 */
#include "glibc_compat.h" /* first: binds glibc versions (see there) */
#include "track.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t key;
    uint64_t bytes;
    int8_t kind; /* 0: empty */
    int8_t dev;
} track_entry;

static pthread_mutex_t track_lock = PTHREAD_MUTEX_INITIALIZER;
static track_entry *track_tab;
static size_t track_cap, track_len;

static size_t track_hash(uint64_t key, int kind)
{
    uint64_t h = (key ^ (uint64_t)kind << 56) * 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> 20);
}

static void track_insert(track_entry *tab, size_t cap, track_entry e)
{
    size_t i = track_hash(e.key, e.kind) & (cap - 1);
    while (tab[i].kind != 0)
        i = (i + 1) & (cap - 1);
    tab[i] = e;
}

static bool track_grow(void)
{
    size_t cap = track_cap ? track_cap * 2 : 256;
    track_entry *tab = calloc(cap, sizeof(*tab));
    if (!tab)
        return false;
    for (size_t i = 0; i < track_cap; i++)
        if (track_tab[i].kind != 0)
            track_insert(tab, cap, track_tab[i]);
    free(track_tab);
    track_tab = tab;
    track_cap = cap;
    return true;
}

bool gpucuda_track_add(uint64_t key, int kind, int dev, uint64_t bytes)
{
    pthread_mutex_lock(&track_lock);
    bool ok = (track_len + 1) * 2 <= track_cap || track_grow();
    if (ok) {
        track_insert(
            track_tab, track_cap,
            (track_entry){.key = key, .bytes = bytes, .kind = (int8_t)kind, .dev = (int8_t)dev});
        track_len++;
    }
    pthread_mutex_unlock(&track_lock);
    return ok;
}

bool gpucuda_track_remove(uint64_t key, int kind, int *dev, uint64_t *bytes)
{
    pthread_mutex_lock(&track_lock);
    bool found = false;
    if (track_cap) {
        size_t mask = track_cap - 1, i = track_hash(key, kind) & mask;
        for (; track_tab[i].kind != 0; i = (i + 1) & mask) {
            if (track_tab[i].key == key && track_tab[i].kind == kind) {
                found = true;
                break;
            }
        }
        if (found) {
            *dev = track_tab[i].dev;
            *bytes = track_tab[i].bytes;
            /* Backward shift: move later entries of the probe run into the hole. */
            size_t hole = i;
            for (size_t j = (i + 1) & mask; track_tab[j].kind != 0; j = (j + 1) & mask) {
                size_t home = track_hash(track_tab[j].key, track_tab[j].kind) & mask;
                /* j may move to hole when its home is not in (hole, j]. */
                bool in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
                if (!in_range) {
                    track_tab[hole] = track_tab[j];
                    hole = j;
                }
            }
            memset(&track_tab[hole], 0, sizeof(track_tab[hole]));
            track_len--;
        }
    }
    pthread_mutex_unlock(&track_lock);
    return found;
}

void gpucuda_track_reset_after_fork(void)
{
    pthread_mutex_init(&track_lock, NULL);
    if (track_tab)
        memset(track_tab, 0, track_cap * sizeof(*track_tab));
    track_len = 0;
}
