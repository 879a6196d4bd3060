/*
 * budget.c - the container's shared memory budget (layout and rules in
 * budget.h).
 */
#include "glibc_compat.h" /* first: binds glibc versions (see there) */
#include "budget.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* getpid() without a system call at every charge: cached, and renewed in
 * a forked child (which must take a slot of its own). */
static pid_t budget_pid;
static pthread_once_t budget_pid_once = PTHREAD_ONCE_INIT;

static void budget_pid_after_fork(void)
{
    budget_pid = getpid();
}

static void budget_pid_init(void)
{
    budget_pid = getpid();
    pthread_atfork(NULL, NULL, budget_pid_after_fork);
}

static pid_t self_pid(void)
{
    pthread_once(&budget_pid_once, budget_pid_init);
    return budget_pid;
}

/* A process's state and start time from /proc/<pid>/stat. false when the
 * file cannot be read (no such process, or no /proc). */
static bool proc_stat(pid_t pid, char *state, uint64_t *starttime)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    /* pid (comm) state ppid ... : comm may hold spaces and parentheses, so
     * fields count from the last ')'. starttime is field 22. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return false;
    p += 2;
    *state = *p;
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return false;
        p++;
    }
    *starttime = strtoull(p, NULL, 10);
    return true;
}

static uint64_t own_starttime(void)
{
    char state;
    uint64_t t = 0;
    return proc_stat(self_pid(), &state, &t) ? t : 0;
}

static bool slot_alive(const gpucuda_budget_slot *s)
{
    char state;
    uint64_t t;
    if (proc_stat(s->pid, &state, &t))
        return state != 'Z' && state != 'X' && (s->starttime == 0 || t == s->starttime);
    /* No /proc entry: ask the kernel (EPERM: alive, another user's). */
    return kill(s->pid, 0) == 0 || errno == EPERM;
}

static void region_init(gpucuda_budget_shm *s, bool shared)
{
    memset(s, 0, sizeof(*s));
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    if (shared)
        pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&s->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    s->version = GPUCUDA_BUDGET_VERSION;
    s->size = sizeof(*s);
    __atomic_store_n(&s->magic, GPUCUDA_BUDGET_MAGIC, __ATOMIC_RELEASE);
}

static int open_private(gpucuda_budget *b)
{
    void *p = mmap(NULL, sizeof(gpucuda_budget_shm), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    region_init(p, false);
    *b = (gpucuda_budget){.shm = p, .shared = false, .slot = -1, .pid = self_pid()};
    return 0;
}

/* The file's region, initialized by whoever finds it new (under flock, so
 * two first processes do not both initialize it), or NULL. */
static gpucuda_budget_shm *open_shared(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) {
        fprintf(
            stderr,
            "libgpubox-cuda: cannot open the budget %s (%s); limiting each process on its own\n",
            path, strerror(errno));
        return NULL;
    }
    gpucuda_budget_shm *s = NULL;
    struct stat st;
    if (flock(fd, LOCK_EX) != 0 || gpucuda_fstat(fd, &st) != 0)
        goto out;
    if (st.st_size == 0) {
        /* New: readable and writable by every user of the container. */
        if (fchmod(fd, 0666) != 0 || ftruncate(fd, sizeof(*s)) != 0)
            goto out;
    } else if (st.st_size != (off_t)sizeof(*s)) {
        fprintf(
            stderr,
            "libgpubox-cuda: the budget %s has another layout; limiting each process on its own\n",
            path);
        goto out;
    }
    void *p = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        goto out;
    s = p;
    if (s->magic == 0) {
        region_init(s, true);
    } else if (s->magic != GPUCUDA_BUDGET_MAGIC || s->version != GPUCUDA_BUDGET_VERSION ||
               s->size != sizeof(*s)) {
        fprintf(
            stderr,
            "libgpubox-cuda: the budget %s has another layout; limiting each process on its own\n",
            path);
        munmap(p, sizeof(*s));
        s = NULL;
    }
out:
    flock(fd, LOCK_UN);
    close(fd);
    return s;
}

int gpucuda_budget_open(gpucuda_budget *b, const char *path)
{
    gpucuda_budget_shm *s = path ? open_shared(path) : NULL;
    if (!s)
        return open_private(b);
    *b = (gpucuda_budget){.shm = s, .shared = true, .slot = -1, .pid = self_pid()};
    return 0;
}

/* The totals from the slots: after a holder died mid-update. */
static void recount_locked(gpucuda_budget_shm *s)
{
    for (uint32_t d = 0; d < GPUCUDA_MAX_DEVICES; d++) {
        uint64_t sum = 0;
        for (int i = 0; i < GPUCUDA_BUDGET_SLOTS; i++)
            if (s->slot[i].pid != 0)
                sum += s->slot[i].used[d];
        s->used[d] = sum;
    }
}

static void slot_free_locked(gpucuda_budget_shm *s, int i)
{
    for (int d = 0; d < GPUCUDA_MAX_DEVICES; d++) {
        uint64_t u = s->slot[i].used[d];
        s->used[d] = s->used[d] >= u ? s->used[d] - u : 0;
    }
    memset(&s->slot[i], 0, sizeof(s->slot[i]));
}

static int reap_locked(gpucuda_budget *b)
{
    gpucuda_budget_shm *s = b->shm;
    pid_t self = self_pid();
    int n = 0;
    for (int i = 0; i < GPUCUDA_BUDGET_SLOTS; i++) {
        if (s->slot[i].pid == 0 || s->slot[i].pid == self)
            continue;
        if (!slot_alive(&s->slot[i])) {
            slot_free_locked(s, i);
            n++;
        }
    }
    return n;
}

int gpucuda_budget_lock(gpucuda_budget *b)
{
    int rc = pthread_mutex_lock(&b->shm->lock);
    if (rc == EOWNERDEAD) {
        /* Its holder died holding it: its slot goes, the totals are redone. */
        reap_locked(b);
        recount_locked(b->shm);
        rc = pthread_mutex_consistent(&b->shm->lock);
    }
    return rc;
}

void gpucuda_budget_unlock(gpucuda_budget *b)
{
    pthread_mutex_unlock(&b->shm->lock);
}

/* The process's slot, taken when it has none (a forked child has its
 * parent's index, not its slot). -1 when every slot is held by a live
 * process. */
static int own_slot_locked(gpucuda_budget *b)
{
    gpucuda_budget_shm *s = b->shm;
    pid_t self = self_pid();
    if (b->slot >= 0 && b->pid == self && s->slot[b->slot].pid == self)
        return b->slot;
    b->pid = self;
    b->slot = -1;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < GPUCUDA_BUDGET_SLOTS; i++) {
            if (s->slot[i].pid == self) /* left by an earlier mapping of ours */
                return b->slot = i;
        }
        for (int i = 0; i < GPUCUDA_BUDGET_SLOTS; i++) {
            if (s->slot[i].pid == 0) {
                memset(&s->slot[i], 0, sizeof(s->slot[i]));
                s->slot[i].pid = self;
                s->slot[i].starttime = own_starttime();
                return b->slot = i;
            }
        }
        if (pass == 0 && reap_locked(b) == 0)
            break;
    }
    return -1;
}

int gpucuda_budget_device(gpucuda_budget *b, const unsigned char uuid[16])
{
    if (gpucuda_budget_lock(b) != 0)
        return -1;
    gpucuda_budget_shm *s = b->shm;
    int found = -1;
    for (uint32_t d = 0; d < s->ndev && d < GPUCUDA_MAX_DEVICES; d++)
        if (memcmp(s->uuid[d], uuid, 16) == 0)
            found = (int)d;
    if (found < 0 && s->ndev < GPUCUDA_MAX_DEVICES) {
        memcpy(s->uuid[s->ndev], uuid, 16);
        found = (int)s->ndev++;
    }
    gpucuda_budget_unlock(b);
    return found;
}

int gpucuda_budget_charge(gpucuda_budget *b, int dev, uint64_t bytes, uint64_t limit)
{
    if (dev < 0 || dev >= GPUCUDA_MAX_DEVICES || gpucuda_budget_lock(b) != 0)
        return -1;
    gpucuda_budget_shm *s = b->shm;
    int rc = -1;
    int slot = own_slot_locked(b);
    if (slot >= 0) {
        bool fits = s->used[dev] <= limit && bytes <= limit - s->used[dev];
        /* Short: memory of processes that died may be what is missing. */
        if (!fits && reap_locked(b) > 0)
            fits = s->used[dev] <= limit && bytes <= limit - s->used[dev];
        if (fits) {
            s->used[dev] += bytes;
            s->slot[slot].used[dev] += bytes;
            rc = 0;
        }
    }
    gpucuda_budget_unlock(b);
    return rc;
}

uint64_t gpucuda_budget_own(gpucuda_budget *b, int dev)
{
    if (dev < 0 || dev >= GPUCUDA_MAX_DEVICES || gpucuda_budget_lock(b) != 0)
        return 0;
    pid_t self = self_pid();
    uint64_t mine = 0;
    if (b->slot >= 0 && b->pid == self && b->shm->slot[b->slot].pid == self)
        mine = b->shm->slot[b->slot].used[dev];
    gpucuda_budget_unlock(b);
    return mine;
}

void gpucuda_budget_refund(gpucuda_budget *b, int dev, uint64_t bytes)
{
    if (dev < 0 || dev >= GPUCUDA_MAX_DEVICES || gpucuda_budget_lock(b) != 0)
        return;
    gpucuda_budget_shm *s = b->shm;
    int slot = own_slot_locked(b);
    if (slot >= 0) {
        uint64_t mine = s->slot[slot].used[dev];
        if (bytes > mine)
            bytes = mine; /* never below zero: the budget may have been reset */
        s->slot[slot].used[dev] -= bytes;
        s->used[dev] = s->used[dev] >= bytes ? s->used[dev] - bytes : 0;
    }
    gpucuda_budget_unlock(b);
}

uint64_t gpucuda_budget_used(gpucuda_budget *b, int dev)
{
    if (dev < 0 || dev >= GPUCUDA_MAX_DEVICES)
        return 0;
    return __atomic_load_n(&b->shm->used[dev], __ATOMIC_RELAXED);
}

int gpucuda_budget_reap(gpucuda_budget *b)
{
    if (gpucuda_budget_lock(b) != 0)
        return 0;
    int n = reap_locked(b);
    gpucuda_budget_unlock(b);
    return n;
}

void gpucuda_budget_leave(gpucuda_budget *b)
{
    if (b->shm && b->pid == self_pid() && b->slot >= 0 && gpucuda_budget_lock(b) == 0) {
        if (b->shm->slot[b->slot].pid == b->pid)
            slot_free_locked(b->shm, b->slot);
        b->slot = -1;
        gpucuda_budget_unlock(b);
    }
}

void gpucuda_budget_close(gpucuda_budget *b)
{
    if (!b->shm)
        return;
    gpucuda_budget_leave(b);
    munmap(b->shm, sizeof(*b->shm));
    b->shm = NULL;
    b->slot = -1;
}
