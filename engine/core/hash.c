/* FNV-1a 64 followed by the splitmix64 finalizer. FNV-1a alone mixes its
 * last bytes poorly into the high bits, and names that differ only in a
 * trailing digit ("experts.17" vs "experts.18") must still spread evenly over
 * owners, hence the avalanche step. Frozen: ownership depends on these bits. */
#include "dcr/hash.h"

#include <string.h>

#define DCR__FNV64_OFFSET 0xcbf29ce484222325ull
#define DCR__FNV64_PRIME  0x100000001b3ull

uint64_t dcr_hash64_mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t dcr_hash64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = DCR__FNV64_OFFSET;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= DCR__FNV64_PRIME;
    }
    return dcr_hash64_mix(h);
}

uint64_t dcr_hash64_str(const char *text)
{
    if (text == NULL) return dcr_hash64("", 0);
    return dcr_hash64(text, strlen(text));
}
