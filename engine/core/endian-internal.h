/* Little-endian fields of dcr's own binary records (control-plane values,
 * receiver digests and node reports, relay frames), shared by the engine's
 * modules; not part of the public interface. Written byte by byte, so they
 * hold on any host and any alignment (compilers fold them into single loads
 * and stores on little-endian hosts). The payload codec reads its words in
 * host order instead and refuses big-endian hosts (codec-internal.h). */
#ifndef DCR_CORE_ENDIAN_INTERNAL_H
#define DCR_CORE_ENDIAN_INTERNAL_H

#include <stdint.h>

/* Writes the low `bytes` (1..8) bytes of v at p, least significant first;
 * returns the position after them. */
static inline uint8_t *dcr__put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
    return p + bytes;
}

/* The `bytes` (1..8) bytes at p as a little-endian number. */
static inline uint64_t dcr__le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Reads `bytes` bytes at p into *v as dcr__le does; returns the position
 * after them (for reading a record field by field). */
static inline const uint8_t *dcr__get_le(const uint8_t *p, uint64_t *v, int bytes)
{
    *v = dcr__le(p, bytes);
    return p + bytes;
}

#endif
