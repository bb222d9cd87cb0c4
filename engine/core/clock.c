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
