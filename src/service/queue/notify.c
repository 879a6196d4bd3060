/*
 * notify.c - --queue-webhook: a JSON note posted when a queued set starts,
 * so its owner learns it without polling (docs/queue.md):
 *   {"event": "queue.start", "name", "owner", "waitedSeconds",
 *    "containerName", "version", "node", "time"}
 * One POST with a short timeout from the dispatcher's thread; a webhook
 * that does not answer costs the dispatcher QUEUE_WEBHOOK_TIMEOUT_S at
 * most and is logged, never retried (the event in GET /api/v1/events
 * stays the record of it).
 */
#include "service/queue/queue_internal.h"

#include <curl/curl.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

#define QUEUE_WEBHOOK_TIMEOUT_S 3

static size_t queue_notify_discard(char *p, size_t size, size_t n, void *ctx)
{
    (void)p;
    (void)ctx;
    return size * n;
}

void queue_notify_started(app *a, const replicaset_record *r, double waited_s, const json_t *data)
{
    const char *url = a->cfg.queue_webhook;
    if (!url || !*url)
        return;
    char now[RS_TIME_MAX];
    time_iso_now(now, sizeof(now));
    _cleanup_json_ json_t *note =
        json_pack("{s:s, s:s, s:s, s:f, s:O?, s:O?, s:s?, s:s}", "event", "queue.start", "name",
                  r->name, "owner", r->owner, "waitedSeconds", waited_s, "containerName",
                  json_object_get(data, "containerName"), "version",
                  json_object_get(data, "version"), "node", a->cfg.node, "time", now);
    _cleanup_free_ char *body = note ? json_dumps(note, JSON_COMPACT) : NULL;
    CURL *h = curl_easy_init();
    if (!h || !body) {
        if (h)
            curl_easy_cleanup(h);
        return;
    }
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)QUEUE_WEBHOOK_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, queue_notify_discard);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || status >= 300)
        log_warn("queue: webhook %s for %s: %s", url, r->name,
                 rc != CURLE_OK ? curl_easy_strerror(rc) : "the hook answered an error status");
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
}
