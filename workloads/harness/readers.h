/* Request emulation: reader threads that serve requests from receivers
 * through their request gates (dcr/coord.h), each read summarized by a
 * digest of the receiver's resident storage, so that a harness can check
 * that every request saw exactly P^v or P^{v+1}. Used by `dcr bench` and by
 * the fault runs. */
#ifndef DCR_WORKLOADS_READERS_H
#define DCR_WORKLOADS_READERS_H

#include <stdint.h>

#include "dcr/coord.h"
#include "dcr/receiver.h"

#define DCR_READ_DIGEST_BYTES 16

/* BLAKE2b-128 of the receiver's per-parameter digests
 * (dcr_receiver_digests: every resident byte, wherever it lives): what a
 * request would read. Equal digests of two receivers of one TP rank mean
 * equal storage. When the storage cannot be read (a device error, no
 * memory) the error is logged and the digest is one no readable receiver
 * has, so a check of what a request saw fails. */
void dcr_receiver_digest(const dcr_receiver_t *r, uint8_t out[DCR_READ_DIGEST_BYTES]);

typedef struct dcr_readers_config {
    dcr_gate_t *gate;
    int threads;
    const int *slots; /* the slots read, round robin; copied; NULL: every slot of the gate */
    int nslots;
    int pause_us; /* between two reads of one thread */
    /* Called on the reader's thread before it enters a gate; what it returns
     * comes back to seen with the read (a harness's epoch). May be NULL. */
    uint64_t (*begin)(void *ctx, int slot);
    /* Called after each read, outside the gate, from any reader thread
     * (must be thread-safe). */
    void (*seen)(void *ctx, int slot, uint64_t token, const uint8_t digest[DCR_READ_DIGEST_BYTES]);
    void *ctx;
} dcr_readers_config_t;

typedef struct dcr_readers dcr_readers_t;

/* Starts cfg->threads readers (>= 1). A reader skips a slot whose gate
 * stays closed for a few milliseconds, so a dead receiver never blocks it. */
dcr_status_t dcr_readers_start(const dcr_readers_config_t *cfg, dcr_readers_t **out_p);
/* Stops and joins the readers; accepts NULL. */
void dcr_readers_stop(dcr_readers_t *r);

#endif
