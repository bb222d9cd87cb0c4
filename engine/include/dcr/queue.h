/* A bounded multi-producer multi-consumer queue of pointers, the back-pressure
 * primitive of the pipeline: a full queue blocks producers, an empty one
 * blocks consumers. Closing wakes everyone; pushes then fail with
 * DCR_ECLOSED and pops drain what is left before failing with DCR_ECLOSED.
 * The queue stores pointers only; ownership of items passes from pusher to
 * popper. */
#ifndef DCR_QUEUE_H
#define DCR_QUEUE_H

#include <stddef.h>

#include "dcr/status.h"

typedef struct dcr_queue dcr_queue_t;

dcr_status_t dcr_queue_create(size_t capacity, dcr_queue_t **out_p);
/* Frees the queue (not the items still in it); accepts NULL. */
void dcr_queue_destroy(dcr_queue_t *q);
/* Blocks while full. timeout_ms < 0 waits forever; DCR_ETIMEOUT on expiry. */
dcr_status_t dcr_queue_push(dcr_queue_t *q, void *item, int timeout_ms);
/* Blocks while empty. DCR_ETIMEOUT on expiry; DCR_ECLOSED once closed and drained. */
dcr_status_t dcr_queue_pop(dcr_queue_t *q, int timeout_ms, void **out_p);
void dcr_queue_close(dcr_queue_t *q);
size_t dcr_queue_size(dcr_queue_t *q);

#endif
