/* The one way text from data (labels, model names, paths) enters a gnuplot
 * script: as a single-quoted gnuplot string whose bytes pass a whitelist.
 *
 * gnuplot reads its script line by line and runs a line that starts with
 * '!' as a shell command, so a newline inside a label would turn the rest of
 * the label into a command. Inside single quotes gnuplot expands nothing
 * (no backquote substitution, no macros, no escapes) and only a doubled
 * quote stands for a quote; what remains dangerous is a byte that ends the
 * string or the line. The emitter therefore keeps only printable ASCII that
 * cannot end or escape anything and writes every other byte (control
 * characters, newlines, backslashes, backquotes, '@', non-ASCII) as '?'.
 *
 * Lives in workloads/harness so that sim/ and reports/ share it (LAYERS). */
#ifndef DCR_WORKLOADS_GNUPLOT_TEXT_H
#define DCR_WORKLOADS_GNUPLOT_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Longest text kept, in bytes; a longer one is cut and ends in "...". */
#define DCR_GNUPLOT_TEXT_MAX 240

/* Whether byte c may appear as itself inside the emitted string (a quote
 * may: it is written doubled). */
bool dcr_gnuplot_text_allowed(unsigned char c);

/* Writes s (NULL: the empty string) to f as a single-quoted gnuplot string
 * under the whitelist above: one line's worth of text, never a newline. */
void dcr_gnuplot_text_write(FILE *f, const char *s);

/* The same string into buf (cap bytes, NUL-terminated; cut to fit, always
 * closed with its quote when cap >= 3). Returns the length written. */
size_t dcr_gnuplot_text_format(char *buf, size_t cap, const char *s);

#endif
