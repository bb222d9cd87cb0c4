/* Leveled logging to stderr. Progress for long runs goes through DCR_LOG_INFO;
 * the level comes from dcr_log_set_level() or the DCR_LOG environment variable
 * (error, warn, info, debug). Thread-safe: one line per call. */
#ifndef DCR_LOG_H
#define DCR_LOG_H

typedef enum dcr_log_level {
    DCR_LOG_ERROR = 0,
    DCR_LOG_WARN = 1,
    DCR_LOG_INFO = 2,
    DCR_LOG_DEBUG = 3,
} dcr_log_level_t;

void dcr_log_set_level(dcr_log_level_t level);
dcr_log_level_t dcr_log_get_level(void);

/* Parses "error|warn|info|debug"; returns 0 on success, -1 for unknown text. */
int dcr_log_level_parse(const char *text, dcr_log_level_t *out_p);

void dcr_log(dcr_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define DCR_LOG_ERROR(...) dcr_log(DCR_LOG_ERROR, __VA_ARGS__)
#define DCR_LOG_WARN(...)  dcr_log(DCR_LOG_WARN, __VA_ARGS__)
#define DCR_LOG_INFO(...)  dcr_log(DCR_LOG_INFO, __VA_ARGS__)
#define DCR_LOG_DEBUG(...) dcr_log(DCR_LOG_DEBUG, __VA_ARGS__)

#endif
