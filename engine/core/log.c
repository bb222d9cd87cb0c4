/* Leveled logging to stderr, one fprintf per line so concurrent lines never interleave. */
#include "dcr/log.h"
#include "dcr/status.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -1 until first use, so DCR_LOG is read lazily and an explicit
 * dcr_log_set_level() before first use still wins over the environment. */
static atomic_int dcr__log_level = -1;
static pthread_once_t dcr__log_once = PTHREAD_ONCE_INIT;

static const char *const dcr__log_names[] = {"error", "warn", "info", "debug"};

int dcr_log_level_parse(const char *text, dcr_log_level_t *out_p)
{
    if (text == NULL) return -1;
    for (int i = 0; i <= DCR_LOG_DEBUG; i++) {
        if (strcmp(text, dcr__log_names[i]) == 0) {
            if (out_p != NULL) *out_p = (dcr_log_level_t)i;
            return 0;
        }
    }
    return -1;
}

static void dcr__log_init_from_env(void)
{
    dcr_log_level_t level = DCR_LOG_INFO;
    const char *env = getenv("DCR_LOG");
    if (env != NULL && env[0] != '\0' && dcr_log_level_parse(env, &level) != 0) {
        /* The environment is untrusted text: escaped, no raw ESC or newline. */
        char safe[128];
        fprintf(stderr,
                "dcr: warn: DCR_LOG=%s is not one of error, warn, info, debug; using info\n",
                dcr_escape(safe, sizeof(safe), env));
        level = DCR_LOG_INFO;
    }
    int unset = -1;
    atomic_compare_exchange_strong(&dcr__log_level, &unset, (int)level);
}

void dcr_log_set_level(dcr_log_level_t level)
{
    if ((int)level < DCR_LOG_ERROR) level = DCR_LOG_ERROR;
    if ((int)level > DCR_LOG_DEBUG) level = DCR_LOG_DEBUG;
    atomic_store(&dcr__log_level, (int)level);
}

dcr_log_level_t dcr_log_get_level(void)
{
    pthread_once(&dcr__log_once, dcr__log_init_from_env);
    return (dcr_log_level_t)atomic_load(&dcr__log_level);
}

void dcr_log(dcr_log_level_t level, const char *fmt, ...)
{
    if ((int)level > (int)dcr_log_get_level()) return;
    int idx = (int)level < 0 ? 0 : ((int)level > DCR_LOG_DEBUG ? DCR_LOG_DEBUG : (int)level);
    /* Build the whole line first: one fprintf per line is what keeps lines from
     * different threads whole (stdio locks the stream per call). */
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : ((size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    if (len > 0 && msg[len - 1] == '\n') msg[len - 1] = '\0';
    /* Messages quote names from files and peers: escaped, so a line stays one
     * line and a terminal escape stays text (dcr_escape). */
    char safe[sizeof msg];
    fprintf(stderr, "dcr: %s: %s\n", dcr__log_names[idx], dcr_escape(safe, sizeof safe, msg));
}
