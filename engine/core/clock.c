/* Monotonic time: never jumps with NTP or settimeofday, so intervals are sound. */
#include "dcr/clock.h"

#include <time.h>

uint64_t dcr_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double dcr_clock_s(void)
{
    return (double)dcr_clock_ns() * 1e-9;
}

double dcr_clock_process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void dcr_clock_nap_ns(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}
