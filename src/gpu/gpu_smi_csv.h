/*
 * gpu_smi_csv.h - taking apart the CSV nvidia-smi prints (internal to
 * src/gpu/: the inventory in gpu_smi.c, the usage readings in
 * gpu_usage_smi.c).
 *
 * `nvidia-smi --query-gpu=a,b,c --format=csv` (and --query-compute-apps)
 * prints one line per card (or process), its fields separated by ", ":
 *
 *   index, uuid, name, memory.total [MiB]
 *   0, GPU-8f6c..., NVIDIA A100-SXM4-80GB, 81920 MiB
 *
 * "noheader" leaves out the first line, "nounits" the units after numbers
 * ("81920", not "81920 MiB"); gpubox asks for both but accepts either. No
 * field is quoted; lines may end in "\r\n". A value nvidia-smi could not
 * read is in brackets: "[N/A]", "[Not Supported]", "[Unknown Error]",
 * "[GPU requires reset]"...
 *
 * The text comes from another program and may be anything, so it is read
 * in place, as spans (pointer and length) into it: nothing is copied or
 * NUL-terminated before a field has been checked, and no field's length
 * is limited by a buffer it was copied into.
 */
#ifndef GPUBOX_GPU_GPU_SMI_CSV_H
#define GPUBOX_GPU_GPU_SMI_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A span of the CSV text: one line or one field, not NUL-terminated. */
struct gpu_csv_span {
    const char *p;
    size_t len;
};

/* s without leading spaces and tabs, trailing spaces, tabs and '\r'. */
struct gpu_csv_span gpu_csv_trim(struct gpu_csv_span s);

/* s is word, ignoring case. */
bool gpu_csv_eq(struct gpu_csv_span s, const char *word);

/* s is a value nvidia-smi could not read: "[N/A]", "[Unknown Error]"... */
bool gpu_csv_unavailable(struct gpu_csv_span s);

/* Up to 60 bytes of s for an error message, with anything unprintable
 * shown as '?' so a garbled output cannot garble the message, "..." after
 * a cut; in buf (of len, at least 64 for all 60), which is returned. */
const char *gpu_csv_quote(struct gpu_csv_span s, char *buf, size_t len);

/* A decimal of 1..max_digits digits, then optionally the unit (spaces
 * allowed between; "" for a bare number), and nothing else. */
bool gpu_csv_number(struct gpu_csv_span s, size_t max_digits, const char *unit, uint64_t *v);

/* "GPU-..." or "MIG-..." of letters, digits, '-' and '/', shorter than
 * GPU_UUID_MAX. */
bool gpu_csv_valid_uuid(struct gpu_csv_span s);

/* Split a line at commas into at most max fields, each trimmed; returns
 * how many there are (more than max: too many). */
size_t gpu_csv_split(struct gpu_csv_span line, struct gpu_csv_span *fields, size_t max);

/* Walks the CSV's lines, skipping blank ones and a header whose first
 * field is header_word (the first non-blank line only; NULL: no header).
 * Start with {.next = csv (NULL is empty), .first = true, .header_word}. */
struct gpu_csv_lines {
    const char *next;
    int line_no; /* of the line last returned, from 1 */
    bool first;
    const char *header_word;
};

/* The next line, trimmed, into *line; false at the end. */
bool gpu_csv_next_line(struct gpu_csv_lines *it, struct gpu_csv_span *line);

#endif
