/*
 * ssh.c - SSH access to a replica set's container (docs/replicasets.md,
 * "SSH access").
 *
 * A set whose spec has sshKeys gets them, after every start gpubox
 * performs, as /root/.ssh/authorized_keys (directory 0700, file 0600,
 * owner root), and the image's SSH server started:
 *   1. the keys: a tar of .ssh/authorized_keys put into /root with
 *      Docker's archive API, which needs no shell or tool in the image and
 *      works on a container that was created but not started (a paused
 *      set's new version); an image without /root gets it made (0700).
 *      The file is gpubox's: it is written anew at each start, after the
 *      system disk was carried, so a patch of sshKeys takes effect and a
 *      patch to no keys leaves the file empty;
 *   2. the server: /usr/sbin/sshd (OpenSSH: host keys made with
 *      `ssh-keygen -A`, /run/sshd made, then sshd, which goes into the
 *      background) or dropbear (/usr/sbin or /usr/bin: `dropbear -R`, host
 *      keys made on demand in /etc/dropbear), run as root with Docker's
 *      exec; nothing is started when one already runs (the image's own
 *      command may be the server);
 *   3. the answer's "ssh": the command to log in with, the host port of
 *      22/tcp, which server, whether it runs, and a message saying why not.
 * Nothing here fails the operation that started the container: a failure
 * is logged and said in the answer.
 */
#include "util/xalloc.h"
#include "service/replicaset/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/log.h"

#define RS_SSH_EXEC_TIMEOUT_S 30
#define RS_SSH_USER "0:0" /* root by number: an image may have no /etc/passwd */
#define RS_SSH_TAR_BLOCK 512

/* The servers gpubox knows, in the order it looks for them. */
typedef struct replicaset_ssh_server {
    const char *path;
    const char *name; /* as the answer says it */
} replicaset_ssh_server;

static const replicaset_ssh_server replicaset_ssh_servers[] = {
    {"/usr/sbin/sshd", "openssh"},
    {"/usr/sbin/dropbear", "dropbear"},
    {"/usr/bin/dropbear", "dropbear"},
};

/* The host port of 22/tcp in what r holds; 0 when it holds none. */
static unsigned replicaset_ssh_host_port(const replicaset_record *r)
{
    for (size_t i = 0; i < r->nports; i++)
        if (r->ports[i].container_port == RS_SSH_PORT && !strcmp(r->ports[i].protocol, "tcp"))
            return r->ports[i].host_port;
    return 0;
}

/* ---- 1. the keys ---- */

/* One ustar header: owner root, mode, type '0' (file) or '5' (directory). */
static void replicaset_ssh_tar_header(unsigned char *h, const char *name, char type, unsigned mode,
                                      size_t size)
{
    memset(h, 0, RS_SSH_TAR_BLOCK);
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", mode);
    snprintf((char *)h + 108, 8, "%07o", 0u);
    snprintf((char *)h + 116, 8, "%07o", 0u);
    snprintf((char *)h + 124, 12, "%011zo", size);
    snprintf((char *)h + 136, 12, "%011llo", (unsigned long long)time(NULL));
    h[156] = (unsigned char)type;
    memcpy(h + 257,
           "ustar\0"
           "00",
           8);
    memcpy(h + 265, "root", 4);
    memcpy(h + 297, "root", 4);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < RS_SSH_TAR_BLOCK; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

static void replicaset_ssh_fclose(FILE **f)
{
    if (*f)
        fclose(*f);
}

/* One entry of an archive: a directory (data NULL) or a file. */
typedef struct replicaset_ssh_entry {
    const char *name; /* "d/" or "d/f", relative to where it is put */
    unsigned mode;
    const char *data;
    size_t len;
} replicaset_ssh_entry;

/* Put the entries, owned by root, into dir of the container, through a
 * temporary file (Docker reads the archive as a stream). */
static int replicaset_ssh_put(app *a, const char *container, const char *dir,
                              const replicaset_ssh_entry *e, size_t n, gb_err *err)
{
    static const unsigned char zeros[2 * RS_SSH_TAR_BLOCK];
    unsigned char h[RS_SSH_TAR_BLOCK];
    __attribute__((cleanup(replicaset_ssh_fclose))) FILE *f = tmpfile();
    bool ok = f != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        size_t pad = (RS_SSH_TAR_BLOCK - e[i].len % RS_SSH_TAR_BLOCK) % RS_SSH_TAR_BLOCK;
        replicaset_ssh_tar_header(h, e[i].name, e[i].data ? '0' : '5', e[i].mode, e[i].len);
        ok = fwrite(h, 1, sizeof(h), f) == sizeof(h) &&
             fwrite(e[i].data ? e[i].data : "", 1, e[i].len, f) == e[i].len &&
             fwrite(zeros, 1, pad, f) == pad;
    }
    if (!ok || fwrite(zeros, 1, sizeof(zeros), f) != sizeof(zeros) || fflush(f) != 0 ||
        fseek(f, 0, SEEK_SET) != 0)
        return err_set(err, ERR_INTERNAL, "writing an archive to a temporary file failed");
    return docker_container_archive_put(a->docker, container, dir, fileno(f), err);
}

/* authorized_keys: a line saying whose file it is, then the keys. */
static char *replicaset_ssh_keys_text(const replicaset_spec *spec, size_t *len)
{
    size_t size = 256;
    for (size_t i = 0; i < spec->nssh_keys; i++)
        size += strlen(spec->ssh_keys[i]) + 1;
    char *text = xmalloc(size);
    int n = snprintf(text, size,
                     "# Written by gpubox from the replica set's sshKeys at each start; changes "
                     "here are replaced.\n");
    for (size_t i = 0; i < spec->nssh_keys; i++)
        n += snprintf(text + n, size - (size_t)n, "%s\n", spec->ssh_keys[i]);
    *len = (size_t)n;
    return text;
}

/* Write r's keys (none: an empty list) into its container. */
static int replicaset_ssh_write_keys(app *a, const replicaset_record *r, gb_err *err)
{
    bool has_root = false;
    if (docker_container_path_exists(a->docker, r->container_name, "/root", &has_root, err) < 0)
        return -1;
    size_t len = 0;
    _cleanup_free_ char *text = replicaset_ssh_keys_text(&r->spec, &len);
    replicaset_ssh_entry e[] = {
        {"root/", 0700, NULL, 0},
        {"root/.ssh/", 0700, NULL, 0},
        {"root/.ssh/authorized_keys", 0600, text, len},
    };
    /* Into / only when there is no /root: the entry "root/" would set the
     * mode of an existing /root too. */
    if (!has_root)
        return replicaset_ssh_put(a, r->container_name, "/", e, ARRAY_SIZE(e), err);
    e[1].name = ".ssh/";
    e[2].name = ".ssh/authorized_keys";
    return replicaset_ssh_put(a, r->container_name, "/root", e + 1, 2, err);
}

/* ---- 2. the server ---- */

/* Which server the image has (NULL: none). */
static const replicaset_ssh_server *replicaset_ssh_detect(app *a, const char *container,
                                                          gb_err *err)
{
    for (size_t i = 0; i < ARRAY_SIZE(replicaset_ssh_servers); i++) {
        bool found = false;
        if (docker_container_path_exists(a->docker, container, replicaset_ssh_servers[i].path,
                                         &found, err) < 0)
            return NULL;
        if (found)
            return &replicaset_ssh_servers[i];
    }
    return NULL;
}

/* Whether an SSH server process runs in the (running) container: a
 * command whose program is sshd or dropbear ("sshd: /usr/sbin/sshd ..."
 * as OpenSSH names itself). */
static int replicaset_ssh_server_running(app *a, const char *container, bool *running, gb_err *err)
{
    *running = false;
    _cleanup_json_ json_t *cmds = NULL;
    if (docker_container_commands(a->docker, container, &cmds, err) < 0)
        return -1;
    size_t i;
    json_t *v;
    json_array_foreach(cmds, i, v)
    {
        const char *cmd = json_string_value(v);
        size_t end = strcspn(cmd, " :");
        const char *prog = cmd;
        for (const char *p = cmd; p < cmd + end; p++)
            if (*p == '/')
                prog = p + 1;
        size_t plen = (size_t)(cmd + end - prog);
        if ((plen == 4 && !strncmp(prog, "sshd", 4)) ||
            (plen == 8 && !strncmp(prog, "dropbear", 8)))
            *running = true;
    }
    return 0;
}

/* Run cmd as root in the container; its stderr (or stdout) says why when
 * it exits non-zero. */
static int replicaset_ssh_exec(app *a, const char *container, const char *const *cmd, size_t ncmd,
                               gb_err *err)
{
    docker_exec_result res;
    if (docker_exec_run_as(a->docker, container, RS_SSH_USER, cmd, ncmd, "/", RS_SSH_EXEC_TIMEOUT_S,
                           4096, &res, err) < 0)
        return -1;
    int rc = 0;
    if (res.timed_out || res.exit_code != 0) {
        const char *why = res.out_stderr && *res.out_stderr ? res.out_stderr : res.out_stdout;
        rc = err_set(err, ERR_INTERNAL, "%s %s: %.300s", cmd[0],
                     res.timed_out ? "did not finish within 30 s" : "failed",
                     why && *why ? why : "no output");
        /* one line is enough */
        char *nl = strchr(err->msg, '\n');
        if (nl)
            *nl = '\0';
    }
    docker_exec_result_free(&res);
    return rc;
}

/* The directory parent/name (mode 0755) unless it exists or parent does
 * not (the server then says what it misses). */
static int replicaset_ssh_make_dir(app *a, const char *container, const char *parent,
                                   const char *name, gb_err *err)
{
    char path[128], entry[64];
    snprintf(path, sizeof(path), "%s/%s", parent, name);
    snprintf(entry, sizeof(entry), "%s/", name);
    bool exists = false, parent_exists = false;
    if (docker_container_path_exists(a->docker, container, path, &exists, err) < 0 ||
        (!exists &&
         docker_container_path_exists(a->docker, container, parent, &parent_exists, err) < 0))
        return -1;
    if (exists || !parent_exists)
        return 0;
    replicaset_ssh_entry e = {entry, 0755, NULL, 0};
    return replicaset_ssh_put(a, container, parent, &e, 1, err);
}

static int replicaset_ssh_start_openssh(app *a, const char *container, gb_err *err)
{
    bool keygen = false;
    if (docker_container_path_exists(a->docker, container, "/usr/bin/ssh-keygen", &keygen, err) < 0)
        return -1;
    static const char *const keygen_cmd[] = {"/usr/bin/ssh-keygen", "-A"};
    static const char *const sshd_cmd[] = {"/usr/sbin/sshd"};
    if ((keygen &&
         replicaset_ssh_exec(a, container, keygen_cmd, ARRAY_SIZE(keygen_cmd), err) < 0) ||
        replicaset_ssh_make_dir(a, container, "/run", "sshd", err) < 0)
        return -1;
    return replicaset_ssh_exec(a, container, sshd_cmd, ARRAY_SIZE(sshd_cmd), err);
}

static int replicaset_ssh_start_dropbear(app *a, const char *container, const char *path,
                                         gb_err *err)
{
    const char *cmd[] = {path, "-R"};
    if (replicaset_ssh_make_dir(a, container, "/etc", "dropbear", err) < 0)
        return -1;
    return replicaset_ssh_exec(a, container, cmd, ARRAY_SIZE(cmd), err);
}

/* ---- 3. the answer ---- */

static char *replicaset_ssh_command_at(app *a, unsigned port)
{
    const char *host = a->cfg.public_host ? a->cfg.public_host : "localhost";
    return port ? xasprintf("ssh -p %u root@%s", port, host) : NULL;
}

char *replicaset_ssh_command(app *a, const replicaset_record *r)
{
    return r->spec.nssh_keys ? replicaset_ssh_command_at(a, replicaset_ssh_host_port(r)) : NULL;
}

static json_t *replicaset_ssh_object(app *a, const replicaset_record *r,
                                     const replicaset_ssh_server *server, bool running,
                                     const char *message)
{
    unsigned port = replicaset_ssh_host_port(r);
    _cleanup_free_ char *command = replicaset_ssh_command_at(a, port);
    return json_pack("{s:s?, s:o, s:s?, s:b, s:s}", "command", command, "port",
                     port ? json_integer(port) : json_null(), "server",
                     server ? server->name : NULL, "running", running, "message", message);
}

#define RS_SSH_NO_SERVER                                                                           \
    "the image has no SSH server (none of /usr/sbin/sshd, /usr/sbin/dropbear, "                    \
    "/usr/bin/dropbear): the keys are in /root/.ssh/authorized_keys but nothing listens on "       \
    "port 22; use an image with openssh-server or dropbear, or start a server yourself"

/* The ssh object for r as its container is now; *server_out (may be NULL)
 * gets the server found. */
static json_t *replicaset_ssh_look(app *a, const replicaset_record *r,
                                   const replicaset_ssh_server **server_out, bool *running_out)
{
    gb_err err = GB_ERR_INIT;
    bool running = false;
    char msg[sizeof(err.msg) + 128];
    if (r->state != RS_STATE_RUNNING) {
        snprintf(msg, sizeof(msg),
                 "the set is %s; gpubox starts its SSH server when the set starts again",
                 replicaset_state_name(r->state));
        return replicaset_ssh_object(a, r, NULL, false, msg);
    }
    const replicaset_ssh_server *server = replicaset_ssh_detect(a, r->container_name, &err);
    if (server_out)
        *server_out = server;
    if (!server) {
        if (err.msg[0])
            snprintf(msg, sizeof(msg), "cannot look for an SSH server: %s", err.msg);
        return replicaset_ssh_object(a, r, NULL, false, err.msg[0] ? msg : RS_SSH_NO_SERVER);
    }
    if (replicaset_ssh_server_running(a, r->container_name, &running, &err) < 0)
        snprintf(msg, sizeof(msg), "cannot tell whether %s runs: %s", server->name, err.msg);
    else if (running)
        snprintf(msg, sizeof(msg), "%s is running; log in as root with your key", server->name);
    else
        snprintf(msg, sizeof(msg),
                 "%s is installed but not running; restart the set to have gpubox start it",
                 server->name);
    if (running_out)
        *running_out = running;
    return replicaset_ssh_object(a, r, server, running, msg);
}

json_t *replicaset_ssh_info(app *a, const replicaset_record *r)
{
    if (r->spec.nssh_keys == 0)
        return json_null();
    return replicaset_ssh_look(a, r, NULL, NULL);
}

/* Start the server when one is there and none runs; the ssh object. */
static json_t *replicaset_ssh_start(app *a, const replicaset_record *r)
{
    const replicaset_ssh_server *server = NULL;
    bool running = false;
    json_t *look = replicaset_ssh_look(a, r, &server, &running);
    if (!server || running || r->state != RS_STATE_RUNNING)
        return look;
    json_decref(look);
    gb_err err = GB_ERR_INIT;
    int rc = strcmp(server->name, "openssh") == 0
                 ? replicaset_ssh_start_openssh(a, r->container_name, &err)
                 : replicaset_ssh_start_dropbear(a, r->container_name, server->path, &err);
    if (rc == 0 && replicaset_ssh_server_running(a, r->container_name, &running, &err) == 0 &&
        running) {
        log_info("replica set %s: started %s in %s", r->name, server->name, r->container_name);
        return replicaset_ssh_look(a, r, NULL, NULL);
    }
    char msg[sizeof(err.msg) + 64];
    if (rc == 0 && !err.msg[0])
        snprintf(err.msg, sizeof(err.msg), "it exited at once");
    snprintf(msg, sizeof(msg), "starting %s failed: %s", server->name, err.msg);
    log_warn("replica set %s: %s", r->name, msg);
    return replicaset_ssh_object(a, r, server, false, msg);
}

void replicaset_ssh_after_start(app *a, const replicaset_record *r, const replicaset_spec *before,
                                json_t *answer)
{
    bool had_keys = before && before->nssh_keys > 0;
    if (r->spec.nssh_keys == 0 && !had_keys)
        return;
    gb_err err = GB_ERR_INIT;
    if (replicaset_ssh_write_keys(a, r, &err) < 0) {
        log_warn("replica set %s: writing /root/.ssh/authorized_keys into %s failed: %s", r->name,
                 r->container_name, err.msg);
        if (answer && r->spec.nssh_keys > 0) {
            char msg[sizeof(err.msg) + 64];
            snprintf(msg, sizeof(msg), "writing /root/.ssh/authorized_keys failed: %s", err.msg);
            json_object_set_new(answer, "ssh", replicaset_ssh_object(a, r, NULL, false, msg));
        }
        return;
    }
    if (r->spec.nssh_keys == 0)
        return;
    json_t *ssh = replicaset_ssh_start(a, r);
    if (answer)
        json_object_set_new(answer, "ssh", ssh);
    else
        json_decref(ssh);
}
