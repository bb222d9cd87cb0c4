/* Whitelisted gnuplot strings (workloads/harness/gnuplot_text.h). */
#include "workloads/harness/gnuplot_text.h"

#include <string.h>

bool dcr_gnuplot_text_allowed(unsigned char c)
{
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) return true;
    /* Punctuation that labels use and that means nothing inside a
     * single-quoted gnuplot string. Left out on purpose: '\\' (a line
     * continuation at the end of a line), '`' (command substitution outside
     * quotes), '@' (macros), ';' (a command separator outside quotes), '"',
     * '$', and every control or non-ASCII byte. */
    return c != '\0' && strchr(" '-_.,:/()[]+=%#*<>&~^!?|{}", c) != NULL;
}

size_t dcr_gnuplot_text_format(char *buf, size_t cap, const char *s)
{
    if (cap < 3) {
        if (cap) buf[0] = '\0';
        return 0;
    }
    size_t n = 0, kept = 0;
    buf[n++] = '\'';
    /* Room for the closing quote and the NUL, and for a doubled quote. */
    for (; s != NULL && *s && n + 3 < cap; s++) {
        if (kept == DCR_GNUPLOT_TEXT_MAX) {
            size_t dots = cap - n - 2 < 3 ? cap - n - 2 : 3;
            memcpy(buf + n, "...", dots);
            n += dots;
            break;
        }
        unsigned char c = (unsigned char)*s;
        if (c == '\'') {
            buf[n++] = '\'';
            buf[n++] = '\'';
        } else {
            buf[n++] = dcr_gnuplot_text_allowed(c) ? (char)c : '?';
        }
        kept++;
    }
    buf[n++] = '\'';
    buf[n] = '\0';
    return n;
}

void dcr_gnuplot_text_write(FILE *f, const char *s)
{
    char buf[2 * DCR_GNUPLOT_TEXT_MAX + 8];
    dcr_gnuplot_text_format(buf, sizeof buf, s);
    fputs(buf, f);
}
