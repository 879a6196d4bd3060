/*
 * proc_status.c - what /proc says of a running process: its signal masks
 * (/proc/<pid>/status and each of its threads'), its cgroups and its
 * children. Every reader answers "cannot tell" (-1, false, 0) rather than
 * guess when a file is missing or does not read as expected.
 */
#include "util/proc.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

static int proc_read_status(const char *path, proc_signals *out)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[512];
    int seen = 0;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "SigIgn: %llx", &out->ignored) == 1 ||
            sscanf(line, "SigCgt: %llx", &out->caught) == 1 ||
            sscanf(line, "SigBlk: %llx", &out->blocked) == 1) {
            seen++;
        } else if (strncmp(line, "NSpid:", 6) == 0) {
            /* "NSpid:\t4711\t7": the last is the innermost namespace's. */
            char *last = strrchr(line, '\t');
            out->ns_pid = last ? strtol(last + 1, NULL, 10) : 0;
            seen++;
        }
    }
    return seen == 4 ? 0 : -1;
}

int proc_signals_of(pid_t pid, proc_signals *out)
{
    char path[64];
    memset(out, 0, sizeof(*out));
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if (proc_read_status(path, out) < 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char tpath[320];
        proc_signals t = {0};
        snprintf(tpath, sizeof(tpath), "/proc/%d/task/%s/status", (int)pid, e->d_name);
        if (proc_read_status(tpath, &t) == 0)
            out->blocked |= t.blocked;
    }
    closedir(d);
    return 0;
}

bool proc_cgroup_mentions(pid_t pid, const char *text)
{
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f)
        return false;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, text))
            return true;
    return false;
}

static bool proc_is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool proc_cgroup_line_container(const char *line, char *id)
{
    bool found = false;
    for (const char *p = line; *p;) {
        if (!proc_is_hex(*p)) {
            p++;
            continue;
        }
        const char *start = p;
        while (proc_is_hex(*p))
            p++;
        if (p - start == PROC_CONTAINER_ID_LEN) {
            memcpy(id, start, PROC_CONTAINER_ID_LEN);
            id[PROC_CONTAINER_ID_LEN] = '\0';
            found = true; /* go on: a nested container's id comes last */
        }
    }
    return found;
}

bool proc_container_id(pid_t pid, char *id)
{
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    bool found = false;
    while (f && fgets(line, sizeof(line), f))
        found = proc_cgroup_line_container(line, id) || found;
    return found;
}

pid_t proc_only_child(pid_t pid)
{
    char path[64], text[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f || !fgets(text, sizeof(text), f))
        return 0;
    int child = 0;
    char rest[8] = "";
    int n = sscanf(text, "%d %7s", &child, rest);
    return n == 1 && child > 0 ? (pid_t)child : 0;
}
