/* The process-wide stop request (dcr/cancel.h): one lock-free atomic, so
 * that a signal handler may set it. */
#include "dcr/cancel.h"

#include <stdatomic.h>

static atomic_int dcr__cancel;

void dcr_cancel_request(void)
{
    atomic_store(&dcr__cancel, 1);
}

bool dcr_cancel_requested(void)
{
    return atomic_load_explicit(&dcr__cancel, memory_order_relaxed) != 0;
}

void dcr_cancel_reset(void)
{
    atomic_store(&dcr__cancel, 0);
}
