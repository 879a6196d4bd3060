/*
 * curl_pool.c - the idle curl handles of one client (see curl_pool.h).
 *
 * The lock is held only to push or pop the stack: curl_easy_init,
 * curl_easy_reset and curl_easy_cleanup run outside it, as closing a
 * connection can take a while.
 */
#include "util/curl_pool.h"

#include <pthread.h>
#include <stdlib.h>

#include "util/xalloc.h"

struct curl_pool {
    pthread_mutex_t lock; /* guards idle and nidle */
    CURL **idle;          /* a stack of max_idle slots: the top is the warmest */
    size_t nidle, max_idle;
};

curl_pool *curl_pool_new(size_t max_idle)
{
    curl_pool *p = xcalloc(1, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    p->idle = xcalloc(max_idle ? max_idle : 1, sizeof(CURL *));
    p->max_idle = max_idle;
    return p;
}

void curl_pool_free(curl_pool *p)
{
    if (!p)
        return;
    while (p->nidle > 0)
        curl_easy_cleanup(p->idle[--p->nidle]);
    pthread_mutex_destroy(&p->lock);
    free(p->idle);
    free(p);
}

CURL *curl_pool_borrow(curl_pool *p)
{
    CURL *h = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->nidle > 0)
        h = p->idle[--p->nidle];
    pthread_mutex_unlock(&p->lock);
    return h ? h : curl_easy_init();
}

void curl_pool_give_back(curl_pool *p, CURL *h)
{
    curl_easy_reset(h); /* forget this call's options; the connection stays open */
    pthread_mutex_lock(&p->lock);
    if (p->nidle < p->max_idle) {
        p->idle[p->nidle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    if (h)
        curl_easy_cleanup(h);
}

size_t curl_pool_idle(curl_pool *p)
{
    pthread_mutex_lock(&p->lock);
    size_t n = p->nidle;
    pthread_mutex_unlock(&p->lock);
    return n;
}
