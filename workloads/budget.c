/* Memory accounting: resident set, physical memory, the memory budget. */
#include "workloads/budget.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

int64_t dcr_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    long long size = 0, resident = 0;
    int got = fscanf(f, "%lld %lld", &size, &resident);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return got == 2 && page > 0 ? (int64_t)resident * page : 0;
}

int64_t dcr_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (int64_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}
