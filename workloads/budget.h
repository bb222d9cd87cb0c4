/* Memory accounting of the workloads: the process's resident set, the
 * machine's physical memory, and the memory budget (--max-memory) that every
 * command building a model or a run checks its estimated peak against before
 * it allocates anything large. */
#ifndef DCR_WORKLOADS_BUDGET_H
#define DCR_WORKLOADS_BUDGET_H

#include <stdint.h>

#include "dcr/status.h"

/* Bytes resident in this process now (/proc/self/statm); 0 when unknown. */
int64_t dcr_rss_bytes(void);

/* Peak resident bytes of this process so far (getrusage ru_maxrss); 0 when
 * unknown. */
int64_t dcr_peak_rss_bytes(void);

#endif
