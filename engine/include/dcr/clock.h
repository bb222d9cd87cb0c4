/* Monotonic clock for timed windows and trace intervals. */
#ifndef DCR_CLOCK_H
#define DCR_CLOCK_H

#include <stdint.h>

/* Nanoseconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
uint64_t dcr_clock_ns(void);
/* Seconds, as double, from the same clock. */
double dcr_clock_s(void);
/* CPU seconds (user + system) this process has used, all threads. */
double dcr_clock_process_cpu_s(void);
/* Sleeps ns nanoseconds (< 1 s) on the monotonic clock's terms; a signal
 * may end it early. */
void dcr_clock_nap_ns(long ns);

#endif
