/* A faults run's summary as `dcr faults --json` prints it and as its text
 * report: the figures that show recovery (faults by kind, attempts,
 * retries, commits, restores, bit mismatches, versions lost) and, with
 * --processes, the kills, restarts and restores of the role processes. */
#ifndef DCR_FAULTS_REPORT_H
#define DCR_FAULTS_REPORT_H

#include <stdbool.h>

#include "faults/faults_run.h"

struct json_t;

/* The summary of `dcr faults <what>` (train, campaign). A new reference. */
struct json_t *dcr_faults_summary_json(const char *what, const dcr_faults_summary_t *s);
/* The same as text on stdout. */
void dcr_faults_summary_print(const char *what, const dcr_faults_summary_t *s);

/* The fields a --processes run adds to the summary's object (SIGKILLs by
 * point, restarts, coordinator kills, processes, restores by kind and by
 * cause, faults drawn, the elastic join). A new reference. */
struct json_t *dcr_faults_processes_json(const dcr_faults_processes_summary_t *p);
/* The same as text on stdout. */
void dcr_faults_processes_print(const dcr_faults_processes_summary_t *p);

/* Whether the summary shows a failed check (a bit mismatch, a lost
 * version, a mixed read through the gate, a premature commit check, a
 * membership mismatch); then one line saying which on stderr, prefixed
 * "dcr faults <what>: ". */
bool dcr_faults_summary_failed(const char *what, const dcr_faults_summary_t *s);

#endif
