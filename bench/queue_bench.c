/*
 * queue_bench.c - the queue dispatcher's decision time (sched/
 * placement_queue.h): 10,000 queued requests on 1,000 nodes of 8 cards,
 * the order (placement_queue_sort) and one pass (placement_queue_plan),
 * as gpuboxd's dispatcher decides on every pass. Issue 29's target: <= 10 ms.
 *
 *   queue_bench [--requests N] [--nodes N] [--rounds R]
 *
 * The fleet: every card held but, on one node in ten, one card free, so
 * the pass starts some requests and the head reserves; the requests mix
 * five shapes (1, 2 and 4 whole cards, an 8 GB share, a time-slice) over
 * priorities 40-60, fair-share usages and submit times, a quarter with a
 * maxDuration (candidates for backfill). Each round copies the nodes'
 * views and the requests afresh (not timed) and times sort + pass; the
 * median and the slowest of the rounds are printed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/placement_queue.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t nreq = 10000, nnodes = 1000, rounds = 21;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--requests"))
            nreq = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--nodes"))
            nnodes = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = strtoul(argv[i + 1], NULL, 10);
    }
    placement_card *cards = calloc(nnodes * 8, sizeof(*cards)),
                   *work_cards = calloc(nnodes * 8, sizeof(*cards));
    placement_node *nodes = calloc(nnodes, sizeof(*nodes)), *work = calloc(nnodes, sizeof(*nodes));
    char(*names)[24] = calloc(nnodes, sizeof(*names));
    for (size_t n = 0; n < nnodes; n++) {
        for (size_t k = 0; k < 8; k++) {
            placement_card *c = &cards[n * 8 + k];
            bool free_one = n % 10 == 0 && k == 0;
            *c = (placement_card){.mode = free_one ? GPUS_MODE_FREE : GPUS_MODE_WHOLE,
                                  .memory_mib = 81920,
                                  .free_memory_mib = free_one ? 81920 : 0,
                                  .tenants = !free_one,
                                  .replicas_total = 4,
                                  .healthy = true,
                                  .shareable = true,
                                  .schedulable = true};
            snprintf(c->model, sizeof(c->model), "NVIDIA A100-SXM4-80GB");
        }
        snprintf(names[n], sizeof(names[n]), "node%04zu", n);
        nodes[n] = (placement_node){.name = names[n],
                                    .readable = true,
                                    .cards = &cards[n * 8],
                                    .ncards = 8,
                                    .free_ports = 1000,
                                    .volume_free_bytes = 1ull << 40,
                                    .alive = true};
    }
    placement_queue_entry *reqs = calloc(nreq, sizeof(*reqs)), *e = calloc(nreq, sizeof(*e));
    char(*rnames)[24] = calloc(nreq, sizeof(*rnames));
    static const unsigned counts[] = {1, 2, 4, 1, 1};
    for (size_t i = 0; i < nreq; i++) {
        snprintf(rnames[i], sizeof(rnames[i]), "req%06zu", i);
        unsigned shape = (unsigned)(i * 7919 % 5);
        reqs[i] = (placement_queue_entry){.name = rnames[i],
                                          .priority = 40 + (int)(i * 31 % 21),
                                          .usage = (double)(i * 104729 % 100000),
                                          .submit_ms = 1700000000000 + (int64_t)i * 1000,
                                          .max_duration_s = i % 4 == 0 ? 600 : 0,
                                          .req = {.gpu_count = counts[shape],
                                                  .memory_mib = shape == 3 ? 8192 : 0,
                                                  .timeslice = shape == 4,
                                                  .ports_needed = 1}};
    }
    placement_queue_release rel[] = {{.node = 5, .at_ms = 1700000000000 + 3600000, .cards = 4}};
    double *took = calloc(rounds, sizeof(*took));
    size_t started = 0;
    for (size_t r = 0; r < rounds; r++) {
        memcpy(work_cards, cards, nnodes * 8 * sizeof(*cards));
        for (size_t n = 0; n < nnodes; n++) {
            work[n] = nodes[n];
            work[n].cards = &work_cards[n * 8];
        }
        memcpy(e, reqs, nreq * sizeof(*e));
        placement_queue_reservation res;
        gb_err err = GB_ERR_INIT;
        double t0 = now_ms();
        placement_queue_sort(e, nreq);
        if (placement_queue_plan(e, nreq, work, nnodes, rel, 1, 1700000000000, 0, &res, &err) < 0) {
            fprintf(stderr, "queue_bench: %s\n", err.msg);
            return 1;
        }
        took[r] = now_ms() - t0;
        started = 0;
        for (size_t i = 0; i < nreq; i++)
            started += e[i].start >= 0;
    }
    qsort(took, rounds, sizeof(*took), cmp_double);
    printf("dispatch decision, %zu queued on %zu nodes of 8 cards: median %.2f ms, slowest %.2f "
           "ms over %zu rounds (%zu start; target <= 10 ms)\n",
           nreq, nnodes, took[rounds / 2], took[rounds - 1], rounds, started);
    free(took);
    free(e);
    free(reqs);
    free(rnames);
    free(work);
    free(nodes);
    free(names);
    free(cards);
    free(work_cards);
    return 0;
}
