/*
 * response.c - building responses: the envelope and its HTTP status.
 */
#include "util/xalloc.h"
#include "http/response.h"
#include "http/stream.h"
#include "http/upgrade.h"

#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

#define HTTP_JSON "application/json"

char *http_envelope_dump(int code, const char *msg, const json_t *data, size_t *len)
{
    /* Build the object by hand rather than json_pack so a borrowed data value
     * needs no extra reference dance. */
    _cleanup_json_ json_t *env = json_object();
    json_object_set_new(env, "code", json_integer(code));
    if (json_object_set_new(env, "msg", json_string(msg ? msg : "")) < 0)
        return NULL; /* json_string refuses a message that is not UTF-8 */
    json_object_set(env, "data", data ? (json_t *)data : json_null());
    char *body = json_dumps(env, JSON_COMPACT);
    if (len)
        *len = strlen(body);
    return body;
}

int http_status_for(int code, bool compat_http_200)
{
    return compat_http_200 ? 200 : err_http_status(code);
}

int http_response_envelope(http_response *resp, int code, const char *msg, json_t *data,
                           gb_err *err)
{
    _cleanup_json_ json_t *owned = data;
    size_t len = 0;
    char *body = http_envelope_dump(code, msg, owned, &len);
    if (!body)
        return err_set(err, ERR_INTERNAL, "the response's message is not UTF-8");
    http_response_clear(resp);
    resp->status = err_http_status(code);
    resp->code = code;
    resp->envelope = true;
    resp->content_type = HTTP_JSON;
    resp->body = body;
    resp->body_len = len;
    return 0;
}

int http_response_data(http_response *resp, json_t *data, gb_err *err)
{
    return http_response_envelope(resp, ERR_OK, HTTP_SUCCESS_MSG, data, err);
}

int http_response_data_text(http_response *resp, const char *data, size_t len, gb_err *err)
{
    (void)err; /* cannot fail now that out of memory aborts; kept for its callers */
    static const char head[] = "{\"code\":200,\"msg\":\"" HTTP_SUCCESS_MSG "\",\"data\":";
    size_t total = sizeof(head) - 1 + len + 1;
    char *body = xmalloc(total + 1);
    memcpy(body, head, sizeof(head) - 1);
    memcpy(body + sizeof(head) - 1, data, len);
    body[total - 1] = '}';
    body[total] = '\0';
    http_response_clear(resp);
    resp->status = 200;
    resp->code = ERR_OK;
    resp->envelope = true;
    resp->content_type = HTTP_JSON;
    resp->body = body;
    resp->body_len = total;
    return 0;
}

void http_response_error(http_response *resp, const gb_err *e)
{
    int code = e && e->code != ERR_OK ? e->code : ERR_INTERNAL;
    const char *msg = e && e->msg[0] ? e->msg : "internal error (no message was recorded)";
    json_t *data = e && e->data[0] ? json_loads(e->data, 0, NULL) : NULL;
    if (http_response_envelope(resp, code, msg, data, NULL) == 0)
        return;
    static const char fallback[] =
        "{\"code\":1199,\"msg\":\"internal error (its message is not UTF-8)\",\"data\":null}";
    http_response_clear(resp);
    resp->status = 500;
    resp->code = ERR_INTERNAL;
    resp->envelope = true;
    resp->content_type = HTTP_JSON;
    resp->body = xstrdup(fallback);
    resp->body_len = strlen(fallback);
}

void http_response_raw(http_response *resp, int status, const char *content_type, char *body,
                       size_t len)
{
    http_response_clear(resp);
    resp->status = status;
    resp->code = status == 200 ? ERR_OK : ERR_INTERNAL;
    resp->envelope = false;
    resp->content_type = content_type;
    resp->body = body;
    resp->body_len = len;
}

void http_response_static(http_response *resp, int status, const char *content_type,
                          const void *body, size_t len)
{
    http_response_raw(resp, status, content_type, NULL, len);
    resp->static_body = body;
}

void http_response_header(http_response *resp, const char *name, const char *value)
{
    if (resp->nheaders >= HTTP_EXTRA_HEADERS)
        abort();
    resp->headers[resp->nheaders][0] = name;
    resp->headers[resp->nheaders][1] = value;
    resp->nheaders++;
}

void http_response_clear(http_response *resp)
{
    free(resp->body);
    http_stream_close(resp->stream);
    http_upgrade_free(resp->upgrade);
    *resp = (http_response){0};
}
