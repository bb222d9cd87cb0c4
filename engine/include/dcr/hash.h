/* A stable 64-bit hash for names: the same bytes give the same value on every
 * machine, build and run (FNV-1a with a final avalanche mix). Ownership and
 * residual-baseline placement depend on it, so it must never change. */
#ifndef DCR_HASH_H
#define DCR_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t dcr_hash64(const void *data, size_t len);
uint64_t dcr_hash64_str(const char *text);
/* Mixes a 64-bit value (splitmix64 finalizer); handy for combining hashes. */
uint64_t dcr_hash64_mix(uint64_t x);

#endif
