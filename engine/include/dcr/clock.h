/* Monotonic clock for timed windows and trace intervals. */
#ifndef DCR_CLOCK_H
#define DCR_CLOCK_H

#include <stdint.h>

/* Nanoseconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
uint64_t dcr_clock_ns(void);
/* Seconds, as double, from the same clock. */
double dcr_clock_s(void);

#endif
