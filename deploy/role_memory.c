/* Memory per role as processes (role_memory.h). */
#define _XOPEN_SOURCE 700

#include "deploy/role_memory.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "dcr/control.h"
#include "dcr/inventory.h"
#include "dcr/log.h"
#include "dcr/objstore.h"
#include "deploy/world.h"

static int64_t g_base_bytes = -1; /* dcr_role_memory_mark_base; -1: not marked */

/* A "Vm...: N kB" field of /proc/self/status in bytes (format names it,
 * e.g. "VmHWM: %lld kB"), or 0. */
static int64_t proc_status_bytes(const char *format)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    long long kb = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, format, &kb) == 1) break;
    fclose(f);
    return kb > 0 ? (int64_t)kb * 1024 : 0;
}

void dcr_role_memory_mark_base(void)
{
    g_base_bytes = proc_status_bytes("VmRSS: %lld kB");
}

int64_t dcr_role_peak_rss_bytes(void)
{
    int64_t hwm = proc_status_bytes("VmHWM: %lld kB");
    if (hwm > 0) return hwm;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (int64_t)ru.ru_maxrss * 1024; /* Linux reports kilobytes */
}

int64_t dcr_role_world_bytes(const dcr_role_world_t *w)
{
    int64_t total = 0;
    for (size_t i = 0; i < w->ns; i++) total += (int64_t)w->shards[i]->bytes;
    for (size_t i = 0; i < w->nc; i++) total += (int64_t)w->canonical[i]->bytes;
    return total;
}

int64_t dcr_role_world_largest_tensor(const dcr_role_world_t *w)
{
    int64_t largest = 0;
    size_t n = dcr_inventory_count(w->sc->inventory);
    for (size_t i = 0; i < n; i++) {
        int64_t b = (int64_t)dcr_desc_bytes(dcr_inventory_at(w->sc->inventory, i));
        if (b > largest) largest = b;
    }
    return largest;
}

void dcr_role_memory_part(dcr_role_memory_t *m, const char *name, int64_t bytes)
{
    if (m->nparts >= DCR_ROLE_MEMORY_PARTS) return;
    m->parts[m->nparts].name = name;
    m->parts[m->nparts].bytes = bytes;
    m->nparts++;
}

static json_t *memory_json(const dcr_role_memory_t *m)
{
    json_t *parts = json_object();
    for (int i = 0; parts && i < m->nparts && i < DCR_ROLE_MEMORY_PARTS; i++)
        json_object_set_new(parts, m->parts[i].name, json_integer(m->parts[i].bytes));
    if (parts && g_base_bytes >= 0)
        json_object_set_new(parts, "process_base", json_integer(g_base_bytes));
    return json_pack("{s:s,s:i,s:I,s:I,s:I,s:o}", "role", m->role, "id", m->id, "peak_rss_bytes",
                     (json_int_t)dcr_role_peak_rss_bytes(), "required_bytes",
                     (json_int_t)m->required_bytes, "harness_bytes", (json_int_t)m->harness_bytes,
                     "parts", parts ? parts : json_object());
}

dcr_status_t dcr_role_memory_write(const char *workdir, const dcr_role_memory_t *m)
{
    char dir[4200], path[4300], tmp[4320];
    snprintf(dir, sizeof(dir), "%s/memory", workdir);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return dcr_error_set(DCR_EIO, "cannot create %s: %s", dir, strerror(errno));
    snprintf(path, sizeof(path), "%s/%s-%d.json", dir, m->role, m->id);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    json_t *j = memory_json(m);
    if (!j) return dcr_error_set(DCR_ENOMEM, "memory figures of %s %d", m->role, m->id);
    int rc = json_dump_file(j, tmp, JSON_COMPACT);
    json_decref(j);
    /* Renamed into place: the launcher never reads half a file. */
    if (rc != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return dcr_error_set(DCR_EIO, "cannot write %s", path);
    }
    return DCR_OK;
}

static int by_role_and_id(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c = strcmp(json_string_value(json_object_get(x, "role")),
                   json_string_value(json_object_get(y, "role")));
    if (c) return c;
    json_int_t i = json_integer_value(json_object_get(x, "id")),
               k = json_integer_value(json_object_get(y, "id"));
    return (i > k) - (i < k);
}

/* One role's file, or NULL (with a warning) when it is not one. */
static json_t *read_one(const char *dir, const char *name)
{
    char path[4400];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j || !json_is_string(json_object_get(j, "role")) ||
        !json_is_integer(json_object_get(j, "id")) ||
        !json_is_integer(json_object_get(j, "peak_rss_bytes"))) {
        DCR_LOG_WARN("memory figures %s: not a role's record (%s)", path,
                     j ? "fields missing" : err.text);
        json_decref(j);
        return NULL;
    }
    return j;
}

json_t *dcr_role_memory_collect(const char *workdir)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/memory", workdir);
    json_t **items = NULL;
    size_t n = 0, cap = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        json_t *j = read_one(dir, e->d_name);
        if (!j) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            json_t **grown = realloc(items, cap * sizeof(*items));
            if (!grown) {
                json_decref(j);
                break;
            }
            items = grown;
        }
        items[n++] = j;
    }
    if (d) closedir(d);
    if (n) qsort(items, n, sizeof(*items), by_role_and_id);
    json_t *all = json_array();
    for (size_t i = 0; i < n; i++) {
        if (all) json_array_append(all, items[i]);
        json_decref(items[i]);
    }
    free(items);
    return all;
}

void dcr_role_log_requests(const char *role, int id, uint64_t versions)
{
    dcr_control_counts_t c;
    dcr_objstore_counts_t o;
    dcr_control_counts(&c);
    dcr_objstore_transport_counts(&o);
    DCR_LOG_INFO("requests: %s %d over %llu versions: control plane %llu reads, %llu writes, "
                 "%llu waits (%llu woke); store %llu lists, %llu gets, %llu puts",
                 role, id, (unsigned long long)versions, (unsigned long long)c.reads,
                 (unsigned long long)c.writes, (unsigned long long)c.waits,
                 (unsigned long long)c.wakeups, (unsigned long long)o.lists,
                 (unsigned long long)o.gets, (unsigned long long)o.puts);
}
