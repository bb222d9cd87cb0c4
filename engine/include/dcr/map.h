/* An open-addressing hash map from 64-bit keys to 64-bit values, for the
 * engine's lookup tables: parameters by name hash and by storage address,
 * written elements by address, seen payloads by id. The map is a plain
 * struct the caller embeds (zero-initialised it is empty) and frees.
 *
 * Keys may repeat when added with dcr_map_add (a name hash can collide):
 * dcr_map_get then takes a match callback that tells the entries apart.
 * dcr_map_upsert keeps keys unique. Not thread-safe. */
#ifndef DCR_MAP_H
#define DCR_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"

typedef struct dcr_map {
    uint64_t *keys;
    uint64_t *vals;
    uint8_t *used; /* 1 for a taken slot */
    size_t cap;    /* a power of two, or 0 before the first insertion */
    size_t len;    /* entries */
} dcr_map_t;

/* Frees the slots; the map is empty (and usable) afterwards. */
void dcr_map_free(dcr_map_t *m);
/* Removes every entry and keeps the slots; O(1) on an empty map. */
void dcr_map_clear(dcr_map_t *m);

/* Adds an entry, also when the key is present. DCR_ENOMEM leaves the map as
 * it was. */
dcr_status_t dcr_map_add(dcr_map_t *m, uint64_t key, uint64_t val);

/* Finds the first entry with this key for which match(val, arg) is nonzero
 * (any entry when match is NULL), in insertion order among equal keys; its
 * value goes to *val_p (may be NULL). Returns whether one was found. */
bool dcr_map_get(const dcr_map_t *m, uint64_t key, int (*match)(uint64_t val, const void *arg),
                 const void *arg, uint64_t *val_p);

/* The value of key, inserted as `init` when absent (*added_p true). The
 * pointer stays valid until the next insertion. For maps whose keys are
 * unique: with repeated keys it returns the first entry's value. */
dcr_status_t dcr_map_upsert(dcr_map_t *m, uint64_t key, uint64_t init, uint64_t **val_p,
                            bool *added_p);

#endif
