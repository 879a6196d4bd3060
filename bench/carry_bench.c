/*
 * carry_bench.c - time carry_system_disk between two containers, for
 * bench/carry.sh.
 *
 * Usage: carry_bench FROM TO [ROUNDS] [METHOD]
 *
 * Carries FROM's system disk into TO, then back, ROUNDS times (default 5),
 * timing each FROM -> TO carry, and ends with the disk in TO. Both must be
 * stopped (TO created, not started) and made from one image. Prints one
 * line: "median_s min_s max_s method entries bytes".
 */
#include <stdio.h>
#include <stdlib.h>

#include "carry/carry.h"
#include "util/log.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s FROM TO [ROUNDS] [auto|overlay|portable]\n", argv[0]);
        return 2;
    }
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    int method = argc > 4 ? carry_method_parse(argv[4]) : CARRY_OVERLAY;
    if (rounds < 1 || rounds > 100 || method < 0) {
        fprintf(stderr, "carry_bench: bad rounds or method\n");
        return 2;
    }
    log_set_level(LOG_WARN);
    gb_err err = GB_ERR_INIT;
    docker_client *c = docker_client_new(NULL, &err);
    if (!c) {
        fprintf(stderr, "carry_bench: %s\n", err.msg);
        return 1;
    }
    double times[100];
    carry_stats st = {0};
    int rc = 0;
    for (int i = 0; i < rounds && rc == 0; i++) {
        if (i > 0) /* back again, so there is something to carry */
            rc = carry_system_disk(c, argv[2], argv[1], (enum carry_method)method, NULL, &err);
        if (rc == 0)
            rc = carry_system_disk(c, argv[1], argv[2], (enum carry_method)method, &st, &err);
        times[i] = st.seconds;
    }
    docker_client_free(c);
    if (rc != 0) {
        fprintf(stderr, "carry_bench: %s\n", err.msg);
        return 1;
    }
    qsort(times, (size_t)rounds, sizeof(times[0]), cmp_double);
    printf("%.6f %.6f %.6f %s %llu %llu\n", times[rounds / 2], times[0], times[rounds - 1],
           carry_method_name(st.used), (unsigned long long)st.entries,
           (unsigned long long)st.bytes);
    return 0;
}
