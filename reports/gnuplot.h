/* Running gnuplot for the figures of dcr report and dcr sim plan: one
 * driver script per figure draws its body once as PNG and once as SVG, and
 * gnuplot runs inside the output folder with its output in gnuplot.log. */
#ifndef DCR_REPORTS_GNUPLOT_H
#define DCR_REPORTS_GNUPLOT_H

#include <stdio.h>

#include "dcr/status.h"

/* Writes DIR/NAME.gp, which draws NAME.body.gp (written by the caller) as
 * NAME.png (pngcairo when this gnuplot has it) and NAME.svg, both without
 * enhanced text so that underscores print as themselves. */
dcr_status_t dcr_gnuplot_write_driver(const char *dir, const char *name, int width, int height);

/* Runs gnuplot (an executable path, see dcr_report_find_gnuplot) on
 * `script` inside dir, appending its output to dir/gnuplot.log. DCR_EIO
 * with one line naming the script when gnuplot fails.
 *
 * gnuplot has no switch that turns its shell escape off ('!cmd', `system`,
 * `shell`, and '<' or '|' file names all start a process), and SHELL does
 * not help (system() always runs /bin/sh). So the child runs under a
 * seccomp filter that refuses to create processes (fork, vfork, clone
 * without CLONE_THREAD, clone3, execveat): gnuplot can draw and open files
 * but start nothing. Where the kernel has no seccomp the run goes on and the
 * whitelist of workloads/harness/gnuplot_text.h is the only guard; a line
 * in gnuplot.log says so. */
dcr_status_t dcr_gnuplot_run(const char *gnuplot, const char *dir, const char *script);

/* For a run staged in `stage` (dcr/outpath.h) that failed with st: keeps
 * stage/gnuplot.log, when there is one, as out_dir/gnuplot.log (under the
 * output-path rule), since the staging folder is about to be removed, and
 * adds its path to the error line. Returns st. */
dcr_status_t dcr_gnuplot_keep_log(dcr_status_t st, const char *stage, const char *out_dir);

/* For a run staged in `stage` that succeeded: removes stage/gnuplot.log
 * (gnuplot's warnings), so only the figures and their data are committed. */
void dcr_gnuplot_drop_log(const char *stage);

/* Writes s as a gnuplot single-quoted string under the whitelist of
 * workloads/harness/gnuplot_text.h: quotes doubled, every byte that could
 * end the string or the line (a newline, a control character, a backslash)
 * and every non-ASCII byte written as '?', cut at DCR_GNUPLOT_TEXT_MAX. */
void dcr_gnuplot_quote(FILE *f, const char *s);

#endif
