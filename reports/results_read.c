/* HDF5 results reader. HDF5's own error stack is silenced, because its
 * multi-line dumps would bury the one line that says what is wrong; every
 * check below becomes one dcr error naming the file and the object. */
#include "reports/results_read.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Keys of the bench configuration that cannot change a per-refit figure:
 * paths, output choices, and the number of timed refits (a sample size). */
static const char *const ignored_keys[] = {"workdir", "keep_payloads", "control", "trace",
                                           "out",     "json",          "log",     "refits"};

/* Choices that do change what is measured, with the value (JSON) a file
 * written before they were recorded implies: every such run verified,
 * recorded every refit, and had its run directory on the disk (dcr bench's
 * default then). */
static const struct {
    const char *key;
    const char *value;
} measured_choices[] = {
    {"verify", "true"}, {"trace_overhead", "false"}, {"run_directory", "\"disk\""}};

static dcr_status_t bad(const char *path, const char *obj, const char *what)
{
    return dcr_error_set(DCR_EPARSE, "%s: %s: %s", path, obj, what);
}

/* Checked before anything is allocated from a size the file declares, so
 * that a small hostile file cannot make the reader allocate gigabytes. */
static dcr_status_t too_big(const char *path, const char *obj, const char *what,
                            unsigned long long declared, unsigned long long cap)
{
    return dcr_error_set(DCR_EPARSE,
                         "%s: %s: %s declares %llu, more than the %llu this reader accepts", path,
                         obj, what, declared, cap);
}

/* Reads a scalar string attribute (fixed or variable length) into a malloc'd copy. */
static dcr_status_t read_string_attr(const char *path, const char *obj, hid_t loc, const char *name,
                                     char **out_p)
{
    char what[128];
    if (H5Aexists(loc, name) <= 0) {
        snprintf(what, sizeof(what), "attribute '%s' is missing", name);
        return bad(path, obj, what);
    }
    hid_t attr = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t type = attr < 0 ? -1 : H5Aget_type(attr);
    hid_t space = attr < 0 ? -1 : H5Aget_space(attr);
    dcr_status_t st = DCR_OK;
    char *text = NULL;
    snprintf(what, sizeof(what), "attribute '%s' is not a scalar string", name);
    if (type < 0 || space < 0 || H5Tget_class(type) != H5T_STRING ||
        H5Sget_simple_extent_type(space) != H5S_SCALAR) {
        st = bad(path, obj, what);
    } else if (H5Aget_storage_size(attr) > DCR_RESULTS_MAX_ATTR_BYTES ||
               H5Tget_size(type) > DCR_RESULTS_MAX_ATTR_BYTES) {
        st = too_big(path, obj, name, (unsigned long long)H5Aget_storage_size(attr),
                     DCR_RESULTS_MAX_ATTR_BYTES);
    } else if (H5Tis_variable_str(type) > 0) {
        char *vl = NULL;
        hid_t mem = H5Tcopy(H5T_C_S1);
        H5Tset_size(mem, H5T_VARIABLE);
        if (H5Aread(attr, mem, &vl) < 0 || !vl)
            st = bad(path, obj, what);
        else
            text = strdup(vl);
        if (vl) H5free_memory(vl);
        H5Tclose(mem);
    } else {
        size_t size = H5Tget_size(type);
        text = size ? calloc(size + 1, 1) : NULL;
        if (!size) st = bad(path, obj, what);
        if (text && H5Aread(attr, type, text) < 0) st = bad(path, obj, what);
    }
    if (st == DCR_OK && !text)
        st = dcr_error_set(DCR_ENOMEM, "%s: %s: attribute '%s'", path, obj, name);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    if (st != DCR_OK) {
        free(text);
        return st;
    }
    *out_p = text;
    return DCR_OK;
}

/* The kind of object a link leads to (H5I_GROUP, H5I_DATASET), or H5I_BADID. */
static H5I_type_t object_kind(hid_t loc, const char *name)
{
    if (H5Lexists(loc, name, H5P_DEFAULT) <= 0) return H5I_BADID;
    hid_t o = H5Oopen(loc, name, H5P_DEFAULT);
    if (o < 0) return H5I_BADID;
    H5I_type_t t = H5Iget_type(o);
    H5Oclose(o);
    return t;
}

static dcr_status_t check_version(const char *path, hid_t f)
{
    if (H5Aexists(f, DCR_RESULTS_VERSION_ATTR) <= 0)
        return bad(path, "/", "not a dcr results file (no attribute dcr_results_version)");
    hid_t attr = H5Aopen(f, DCR_RESULTS_VERSION_ATTR, H5P_DEFAULT);
    hid_t type = attr < 0 ? -1 : H5Aget_type(attr), space = attr < 0 ? -1 : H5Aget_space(attr);
    long long version = -1;
    bool ok = type >= 0 && space >= 0 && H5Tget_class(type) == H5T_INTEGER &&
              H5Tget_size(type) <= 8 && H5Sget_simple_extent_npoints(space) == 1 &&
              H5Aread(attr, H5T_NATIVE_LLONG, &version) >= 0;
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    if (!ok) return bad(path, "/", "attribute dcr_results_version is not one integer");
    if (version != DCR_RESULTS_VERSION)
        return dcr_error_set(DCR_EPARSE, "%s: results version %lld, this dcr reads version %d",
                             path, version, DCR_RESULTS_VERSION);
    if (H5Lexists(f, DCR_RESULTS_RUNS, H5P_DEFAULT) <= 0)
        return bad(path, "/", "not a dcr results file (no group /runs)");
    if (object_kind(f, DCR_RESULTS_RUNS) != H5I_GROUP) return bad(path, "/runs", "is not a group");
    return DCR_OK;
}

typedef struct name_list {
    char **names;
    size_t n;
} name_list_t;

static void free_names(name_list_t *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->names[i]);
    free(l->names);
}

/* Link names of a group in name order, through calls that exist in HDF5
 * 1.10 and later alike (the iterate callbacks changed type in 1.12). */
static dcr_status_t list_links(const char *path, const char *obj, hid_t g, name_list_t *l)
{
    H5G_info_t info;
    if (H5Gget_info(g, &info) < 0) return bad(path, obj, "cannot list its members");
    if (info.nlinks > DCR_RESULTS_MAX_MEMBERS)
        return too_big(path, obj, "member count", (unsigned long long)info.nlinks,
                       DCR_RESULTS_MAX_MEMBERS);
    l->names = calloc(info.nlinks ? info.nlinks : 1, sizeof(*l->names));
    if (!l->names) return dcr_error_set(DCR_ENOMEM, "%s: listing %s", path, obj);
    for (hsize_t i = 0; i < info.nlinks; i++) {
        ssize_t len =
            H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, NULL, 0, H5P_DEFAULT);
        if (len < 0) return bad(path, obj, "cannot list its members");
        if (len > 255)
            return too_big(path, obj, "a member name length", (unsigned long long)len, 255);
        l->names[l->n] = malloc((size_t)len + 1);
        if (!l->names[l->n]) return dcr_error_set(DCR_ENOMEM, "%s: listing %s", path, obj);
        H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, l->names[l->n], (size_t)len + 1,
                           H5P_DEFAULT);
        l->n++;
    }
    return DCR_OK;
}

static bool is_run_name(const char *s)
{
    if (strlen(s) != 6) return false;
    for (int i = 0; i < 6; i++)
        if (!isdigit((unsigned char)s[i])) return false;
    return true;
}

/* Columns a refit may leave unmeasured (NaN): the bounds of a refit run with
 * the recorder off (dcr bench --trace-overhead). */
static bool may_be_unmeasured(const char *col)
{
    return !strcmp(col, "construction_lb_s") || !strcmp(col, "transport_lb_s") ||
           !strcmp(col, "finalization_s");
}

/* Values of one column must be finite (or NaN where unmeasured); bit_exact 0
 * or 1, the rest >= 0. */
static dcr_status_t check_values(const char *path, const char *obj, const char *col,
                                 const double *v, size_t n)
{
    bool flag = !strcmp(col, "bit_exact"), gaps = may_be_unmeasured(col);
    for (size_t i = 0; i < n; i++) {
        char what[160];
        if (gaps && isnan(v[i])) continue;
        if (!isfinite(v[i]) || (flag && v[i] != 0.0 && v[i] != 1.0) || (!flag && v[i] < 0)) {
            snprintf(what, sizeof(what), "refits/%s[%zu] = %g is not %s", col, i, v[i],
                     flag ? "0 or 1" : "a finite value >= 0");
            return bad(path, obj, what);
        }
    }
    return DCR_OK;
}

/* Column values the rest of the file can still hold: a genuine column
 * occupies its own bytes of the file, so the values a file declares in all
 * cannot outnumber its size in bytes over their element size. */
typedef struct read_budget {
    unsigned long long bytes_left;
} read_budget_t;

static dcr_status_t read_column(const char *path, const char *obj, hid_t refits, const char *name,
                                read_budget_t *budget, size_t *nrefits,
                                dcr_results_stored_column_t *out)
{
    char what[192];
    hid_t ds = object_kind(refits, name) == H5I_DATASET ? H5Dopen2(refits, name, H5P_DEFAULT) : -1;
    if (ds < 0) {
        snprintf(what, sizeof(what), "refits/%s is not a dataset", name);
        return bad(path, obj, what);
    }
    hid_t type = H5Dget_type(ds), space = H5Dget_space(ds);
    hsize_t dims[1] = {0};
    dcr_status_t st = DCR_OK;
    snprintf(what, sizeof(what), "refits/%s is not a 1-D floating-point dataset", name);
    if (type < 0 || space < 0 || H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) > 16 ||
        H5Sget_simple_extent_type(space) != H5S_SIMPLE || H5Sget_simple_extent_ndims(space) != 1 ||
        H5Sget_simple_extent_dims(space, dims, NULL) < 0)
        st = bad(path, obj, what);
    snprintf(what, sizeof(what), "refits/%s", name);
    if (st == DCR_OK && dims[0] > DCR_RESULTS_MAX_REFITS)
        st = too_big(path, obj, what, (unsigned long long)dims[0], DCR_RESULTS_MAX_REFITS);
    unsigned long long declared =
        st == DCR_OK ? dims[0] * (unsigned long long)H5Tget_size(type) : 0;
    if (st == DCR_OK && declared > budget->bytes_left)
        st = too_big(path, obj, what, declared, budget->bytes_left);
    if (st == DCR_OK && (unsigned long long)H5Dget_storage_size(ds) < declared) {
        snprintf(what, sizeof(what), "refits/%s stores fewer bytes than its %llu values need", name,
                 (unsigned long long)dims[0]);
        st = bad(path, obj, what);
    }
    if (st == DCR_OK) budget->bytes_left -= declared;
    if (st == DCR_OK && *nrefits != (size_t)-1 && dims[0] != *nrefits) {
        snprintf(what, sizeof(what), "refits/%s has %llu values, other columns %zu", name,
                 (unsigned long long)dims[0], *nrefits);
        st = bad(path, obj, what);
    }
    double *v = NULL;
    if (st == DCR_OK) {
        v = malloc((dims[0] ? dims[0] : 1) * sizeof(double));
        if (!v) st = dcr_error_set(DCR_ENOMEM, "%s: %s: refits/%s", path, obj, name);
    }
    if (st == DCR_OK && dims[0] &&
        H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) {
        snprintf(what, sizeof(what), "refits/%s cannot be read", name);
        st = bad(path, obj, what);
    }
    if (st == DCR_OK) st = check_values(path, obj, name, v, dims[0]);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    H5Dclose(ds);
    out->name = strdup(name);
    if (st == DCR_OK && !out->name) st = dcr_error_set(DCR_ENOMEM, "%s: %s", path, obj);
    if (st != DCR_OK) {
        free(v);
        free(out->name);
        out->name = NULL;
        return st;
    }
    out->values = v;
    *nrefits = dims[0];
    return DCR_OK;
}

static dcr_status_t read_columns(const char *path, hid_t g, read_budget_t *budget,
                                 dcr_results_stored_run_t *run)
{
    if (H5Lexists(g, DCR_RESULTS_REFITS, H5P_DEFAULT) <= 0)
        return bad(path, run->name, "group refits is missing");
    if (object_kind(g, DCR_RESULTS_REFITS) != H5I_GROUP)
        return bad(path, run->name, "refits is not a group");
    hid_t refits = H5Gopen2(g, DCR_RESULTS_REFITS, H5P_DEFAULT);
    if (refits < 0) return bad(path, run->name, "refits is not a group");
    name_list_t l = {0};
    dcr_status_t st = list_links(path, run->name, refits, &l);
    if (st == DCR_OK && l.n) {
        run->columns = calloc(l.n, sizeof(*run->columns));
        if (!run->columns) st = dcr_error_set(DCR_ENOMEM, "%s: %s", path, run->name);
    }
    size_t nrefits = (size_t)-1;
    for (size_t i = 0; st == DCR_OK && i < l.n; i++) {
        st = read_column(path, run->name, refits, l.names[i], budget, &nrefits, &run->columns[i]);
        if (st == DCR_OK) run->ncolumns++;
    }
    free_names(&l);
    H5Gclose(refits);
    DCR_CHECK(st);
    run->nrefits = nrefits == (size_t)-1 ? 0 : nrefits;
    for (int c = 0; c < DCR_RESULTS_NCOLUMNS; c++) {
        if (dcr_results_column(run, dcr_results_column_names[c])) continue;
        char what[128];
        snprintf(what, sizeof(what), "column refits/%s is missing", dcr_results_column_names[c]);
        return bad(path, run->name, what);
    }
    return DCR_OK;
}

static dcr_status_t parse_object(const char *path, const char *obj, const char *attr,
                                 const char *text, json_t **out_p)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    if (!j || !json_is_object(j)) {
        char what[300];
        snprintf(what, sizeof(what), "attribute '%s' is not a JSON object%s%s", attr, j ? "" : ": ",
                 j ? "" : err.text);
        json_decref(j);
        return bad(path, obj, what);
    }
    *out_p = j;
    return DCR_OK;
}

static dcr_status_t read_run(const char *path, hid_t runs, const char *name, read_budget_t *budget,
                             dcr_results_stored_run_t *run)
{
    char obj[64];
    snprintf(obj, sizeof(obj), "/runs/%s", name);
    run->name = strdup(obj);
    if (!run->name) return dcr_error_set(DCR_ENOMEM, "%s", path);
    if (!is_run_name(name)) return bad(path, obj, "is not a run (names are six digits)");
    if (object_kind(runs, name) != H5I_GROUP) return bad(path, obj, "is not a group");
    hid_t g = H5Gopen2(runs, name, H5P_DEFAULT);
    if (g < 0) return bad(path, obj, "cannot be opened");
    char **dst[DCR_RESULTS_NATTRS] = {
        [DCR_RESULTS_ATTR_COMMAND] = &run->command,
        [DCR_RESULTS_ATTR_CONFIG] = &run->config_text,
        [DCR_RESULTS_ATTR_SUMMARY] = &run->summary_text,
        [DCR_RESULTS_ATTR_MACHINE] = &run->machine,
        [DCR_RESULTS_ATTR_GIT_REVISION] = &run->git_revision,
        [DCR_RESULTS_ATTR_TIME] = &run->time,
    };
    dcr_status_t st = DCR_OK;
    for (int i = 0; st == DCR_OK && i < DCR_RESULTS_NATTRS; i++)
        st = read_string_attr(path, obj, g, dcr_results_attr_names[i], dst[i]);
    if (st == DCR_OK) st = parse_object(path, obj, "config", run->config_text, &run->config);
    if (st == DCR_OK) st = parse_object(path, obj, "summary", run->summary_text, &run->summary);
    if (st == DCR_OK) st = read_columns(path, g, budget, run);
    H5Gclose(g);
    DCR_CHECK(st);
    run->config_key = dcr_results_match_key(run, NULL, 0);
    if (!run->config_key) return dcr_error_set(DCR_ENOMEM, "%s: %s", path, obj);
    return DCR_OK;
}

static dcr_status_t read_runs(const char *path, hid_t f, read_budget_t *budget,
                              dcr_results_set_t *set)
{
    hid_t runs = H5Gopen2(f, DCR_RESULTS_RUNS, H5P_DEFAULT);
    if (runs < 0) return bad(path, "/runs", "cannot be opened");
    name_list_t l = {0};
    dcr_status_t st = list_links(path, "/runs", runs, &l);
    if (st == DCR_OK && l.n) {
        set->runs = calloc(l.n, sizeof(*set->runs));
        if (!set->runs) st = dcr_error_set(DCR_ENOMEM, "%s", path);
    }
    for (size_t i = 0; st == DCR_OK && i < l.n; i++) {
        set->nruns++;
        st = read_run(path, runs, l.names[i], budget, &set->runs[i]);
    }
    free_names(&l);
    H5Gclose(runs);
    return st;
}

/* The read itself, in this process, of a regular file of the given size. */
static dcr_status_t read_in_process(const char *path, unsigned long long size,
                                    dcr_results_set_t **out_p)
{
    read_budget_t budget = {size};
    if (H5Fis_hdf5(path) <= 0)
        return dcr_error_set(DCR_EPARSE, "%s is not an HDF5 file (so not dcr results)", path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return dcr_error_set(DCR_EIO, "cannot open %s: not an HDF5 file HDF5 can read", path);
    dcr_results_set_t *set = calloc(1, sizeof(*set));
    dcr_status_t st = set ? DCR_OK : dcr_error_set(DCR_ENOMEM, "%s", path);
    if (st == DCR_OK) {
        set->path = strdup(path);
        if (!set->path) st = dcr_error_set(DCR_ENOMEM, "%s", path);
    }
    if (st == DCR_OK) st = check_version(path, f);
    if (st == DCR_OK) st = read_runs(path, f, &budget, set);
    H5Fclose(f);
    if (st != DCR_OK) {
        dcr_results_set_destroy(set);
        return st;
    }
    *out_p = set;
    return DCR_OK;
}

/* A refusal the child sends back: its status and detail line. */
typedef struct {
    int32_t status;
    char detail[1020];
} probe_refusal_t;

/* The child's side: reads the file and ends 0 (read), 2 (refused, the
 * refusal written to fd first) or by the library's crash. */
static void probe_child(const char *path, unsigned long long size, int fd)
{
    /* The library's crash must end the child: a handler the caller
     * installed (a test runner's, say) would carry on in the child. */
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGALRM};
    for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++) signal(fatal[i], SIG_DFL);
    alarm(DCR_RESULTS_PROBE_SECONDS);
    dcr_results_set_t *set = NULL;
    dcr_status_t st = read_in_process(path, size, &set);
    if (st == DCR_OK) _exit(0);
    probe_refusal_t r = {.status = (int32_t)st};
    snprintf(r.detail, sizeof(r.detail), "%s", dcr_error_detail());
    /* One write under PIPE_BUF: whole or not at all. */
    _exit(write(fd, &r, sizeof(r)) == (ssize_t)sizeof(r) ? 2 : 3);
}

/* Reads the file once in a child process first. libhdf5 trusts the bytes
 * of a file's own structures (object headers, heaps, B-trees) more than a
 * reader of untrusted files can: a results file with 8 bytes changed made
 * H5Aexists and H5Lget_name_by_idx read past their buffers and crash (issue
 * 32). No check before the library's own parsing can cover those, so the
 * first parse happens where a crash or a hang costs only the child: a
 * child that dies is one error line. A file the child refused is refused
 * here with the child's own line, without handing the damaged file to the
 * library a second time (its error paths on damaged files may leak or
 * worse); only a file the library parsed cleanly is read here. Reading
 * twice costs milliseconds for files of megabytes. */
static dcr_status_t probe_in_child(const char *path, unsigned long long size)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return DCR_OK; /* no pipe to spare: read as before */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return DCR_OK; /* no child to spare: read as before */
    }
    if (pid == 0) {
        close(fds[0]);
        probe_child(path, size, fds[1]);
    }
    close(fds[1]);
    int status = 0;
    pid_t waited;
    while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    probe_refusal_t r = {0};
    ssize_t got = read(fds[0], &r, sizeof(r));
    close(fds[0]);
    if (waited < 0) return DCR_OK;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        return dcr_error_set(DCR_EPARSE,
                             "%s: the HDF5 library did not finish reading it in %d s: the file "
                             "is damaged",
                             path, DCR_RESULTS_PROBE_SECONDS);
    if (WIFSIGNALED(status))
        return dcr_error_set(DCR_EPARSE,
                             "%s: the HDF5 library crashed reading it (signal %d): the file is "
                             "damaged",
                             path, WTERMSIG(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return DCR_OK;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2 && got == (ssize_t)sizeof(r) &&
        r.status < 0) {
        r.detail[sizeof(r.detail) - 1] = '\0';
        return dcr_error_set((dcr_status_t)r.status, "%s", r.detail);
    }
    return dcr_error_set(DCR_EPARSE, "%s: reading it failed in a child process (status %d)", path,
                         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

dcr_status_t dcr_results_read(const char *path, dcr_results_set_t **out_p)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (access(path, R_OK) != 0)
        return dcr_error_set(DCR_EIO, "cannot read %s: %s", path, strerror(errno));
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return dcr_error_set(DCR_EIO, "cannot read %s: not a regular file", path);
    DCR_CHECK(probe_in_child(path, (unsigned long long)sb.st_size));
    return read_in_process(path, (unsigned long long)sb.st_size, out_p);
}

static void free_run(dcr_results_stored_run_t *r);

dcr_status_t dcr_results_set_merge(dcr_results_set_t *dst, dcr_results_set_t *src)
{
    if (!src->nruns) {
        dcr_results_set_destroy(src);
        return DCR_OK;
    }
    dcr_results_stored_run_t *runs = realloc(dst->runs, (dst->nruns + src->nruns) * sizeof(*runs));
    if (!runs) return dcr_error_set(DCR_ENOMEM, "merging %s", src->path);
    memcpy(runs + dst->nruns, src->runs, src->nruns * sizeof(*runs));
    dst->runs = runs;
    dst->nruns += src->nruns;
    free(src->runs);
    free(src->path);
    free(src);
    return DCR_OK;
}

static void free_run(dcr_results_stored_run_t *r)
{
    free(r->name);
    free(r->command);
    free(r->config_text);
    free(r->summary_text);
    free(r->machine);
    free(r->git_revision);
    free(r->time);
    json_decref(r->config);
    json_decref(r->summary);
    free(r->config_key);
    for (size_t c = 0; r->columns && c < r->ncolumns; c++) {
        free(r->columns[c].name);
        free(r->columns[c].values);
    }
    free(r->columns);
}

void dcr_results_set_destroy(dcr_results_set_t *set)
{
    if (!set) return;
    for (size_t i = 0; i < set->nruns; i++) free_run(&set->runs[i]);
    free(set->runs);
    free(set->path);
    free(set);
}

const double *dcr_results_column(const dcr_results_stored_run_t *run, const char *name)
{
    for (size_t c = 0; c < run->ncolumns; c++)
        if (!strcmp(run->columns[c].name, name)) return run->columns[c].values;
    return NULL;
}

double dcr_results_summary_number(const dcr_results_stored_run_t *run, const char *key)
{
    json_t *v = json_object_get(run->summary, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static bool listed(const char *key, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(key, list[i])) return true;
    return false;
}

/* The configuration as compared: the keys that cannot change a figure and
 * the caller's ignored keys removed, the measured output choices filled in
 * where an older file did not record them. */
static char *config_body(const json_t *config, const char *const *ignore, size_t nignore)
{
    json_t *copy = json_deep_copy(config);
    if (!copy) return NULL;
    for (size_t i = 0; i < sizeof(ignored_keys) / sizeof(ignored_keys[0]); i++)
        json_object_del(copy, ignored_keys[i]);
    for (size_t i = 0; i < sizeof(measured_choices) / sizeof(measured_choices[0]); i++)
        if (!json_object_get(copy, measured_choices[i].key))
            json_object_set_new(copy, measured_choices[i].key,
                                json_loads(measured_choices[i].value, JSON_DECODE_ANY, NULL));
    for (size_t i = 0; i < nignore; i++) json_object_del(copy, ignore[i]);
    char *body = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(copy);
    return body;
}

static char *join3(const char *a, const char *b, const char *c)
{
    size_t len = strlen(a) + strlen(b) + strlen(c) + 3;
    char *key = malloc(len);
    if (key) snprintf(key, len, "%s\t%s\t%s", a, b, c);
    return key;
}

char *dcr_results_config_key(const char *command, const json_t *config)
{
    char *body = config_body(config, NULL, 0);
    char *key = body ? join3(command, "", body) : NULL;
    free(body);
    return key;
}

char *dcr_results_match_key(const dcr_results_stored_run_t *run, const char *const *ignore,
                            size_t nignore)
{
    char *body = config_body(run->config, ignore, nignore);
    if (!body) return NULL;
    char *key = join3(listed("command", ignore, nignore) ? "" : run->command,
                      listed("machine", ignore, nignore) ? "" : run->machine, body);
    free(body);
    return key;
}

bool dcr_results_has_key(const dcr_results_set_t *set, const char *key)
{
    if (!strcmp(key, "command") || !strcmp(key, "machine")) return true;
    for (size_t i = 0; i < set->nruns; i++)
        if (json_object_get(set->runs[i].config, key)) return true;
    return false;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

dcr_results_stats_t dcr_results_stats(const double *v, size_t n)
{
    dcr_results_stats_t s = {0};
    if (!n) return s;
    double *tmp = malloc(n * sizeof(double));
    if (!tmp) return s;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i])) tmp[kept++] = v[i];
    n = kept;
    if (!n) {
        free(tmp);
        return s;
    }
    qsort(tmp, n, sizeof(double), cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += tmp[i];
    s.n = n;
    s.min = tmp[0];
    s.max = tmp[n - 1];
    s.median = n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
    s.mean = sum / (double)n;
    free(tmp);
    return s;
}

static dcr_status_t group_add(dcr_results_group_t *g, size_t run)
{
    size_t *p = realloc(g->run_index, (g->nruns + 1) * sizeof(*p));
    if (!p) return dcr_error_set(DCR_ENOMEM, "grouping runs");
    p[g->nruns++] = run;
    g->run_index = p;
    return DCR_OK;
}

/* Adds run i under its key (taken over: freed here when a group has it). */
static dcr_status_t group_place(dcr_results_group_t *groups, size_t *n, size_t i, char *key)
{
    size_t g = 0;
    while (g < *n && strcmp(groups[g].key, key)) g++;
    if (g == *n)
        groups[(*n)++].key = key;
    else
        free(key);
    return group_add(&groups[g], i);
}

dcr_status_t dcr_results_group_runs_ignoring(const dcr_results_set_t *set,
                                             const char *const *ignore, size_t nignore,
                                             dcr_results_group_t **groups_p, size_t *n_p)
{
    dcr_results_group_t *groups = calloc(set->nruns ? set->nruns : 1, sizeof(*groups));
    if (!groups) return dcr_error_set(DCR_ENOMEM, "grouping runs");
    size_t n = 0;
    for (size_t i = 0; i < set->nruns; i++) {
        char *key = dcr_results_match_key(&set->runs[i], ignore, nignore);
        dcr_status_t st =
            key ? group_place(groups, &n, i, key) : dcr_error_set(DCR_ENOMEM, "grouping runs");
        if (st != DCR_OK) {
            dcr_results_groups_free(groups, n);
            return st;
        }
    }
    *groups_p = groups;
    *n_p = n;
    return DCR_OK;
}

dcr_status_t dcr_results_group_runs(const dcr_results_set_t *set, dcr_results_group_t **groups_p,
                                    size_t *n_p)
{
    return dcr_results_group_runs_ignoring(set, NULL, 0, groups_p, n_p);
}

void dcr_results_groups_free(dcr_results_group_t *groups, size_t n)
{
    for (size_t i = 0; groups && i < n; i++) {
        free(groups[i].run_index);
        free(groups[i].key);
    }
    free(groups);
}

dcr_status_t dcr_results_group_pool(const dcr_results_set_t *set, const dcr_results_group_t *g,
                                    const char *column, double **v_p, size_t *n_p)
{
    size_t total = 0;
    for (size_t i = 0; i < g->nruns; i++) total += set->runs[g->run_index[i]].nrefits;
    double *v = total ? malloc(total * sizeof(double)) : NULL;
    if (total && !v) return dcr_error_set(DCR_ENOMEM, "pooling %s", column);
    size_t n = 0;
    for (size_t i = 0; i < g->nruns; i++) {
        const dcr_results_stored_run_t *r = &set->runs[g->run_index[i]];
        const double *col = dcr_results_column(r, column);
        if (!col) continue;
        memcpy(v + n, col, r->nrefits * sizeof(double));
        n += r->nrefits;
    }
    *v_p = v;
    *n_p = n;
    return DCR_OK;
}

static const char *config_string(const json_t *config, const char *key)
{
    const char *s = json_string_value(json_object_get(config, key));
    return s ? s : "?";
}

static double config_number(const json_t *config, const char *key)
{
    json_t *v = json_object_get(config, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

void dcr_results_change_label(const json_t *config, char *buf, size_t len)
{
    const char *changes = config_string(config, "changes");
    if (!strcmp(changes, "adamw"))
        snprintf(buf, len, "adamw lr %g", config_number(config, "lr"));
    else
        snprintf(buf, len, "%g%% %s", 100 * config_number(config, "change_rate"), changes);
}

void dcr_results_config_label(const json_t *config, char *buf, size_t len)
{
    char change[64], raw[1024];
    dcr_results_change_label(config, change, sizeof(change));
    snprintf(raw, sizeof(raw), "%s s%g l%g, %s, %s, %s, %s", config_string(config, "model"),
             config_number(config, "scale"), config_number(config, "layers"),
             config_string(config, "transport"), change, config_string(config, "mode"),
             config_string(config, "rl"));
    /* The strings come from a results file: escaped, since labels are printed. */
    dcr_escape(buf, len, raw);
}

/* ---- interleaved A/B runs ------------------------------------------------------ */

static const char *ab_side(const dcr_results_stored_run_t *r)
{
    return json_string_value(json_object_get(r->summary, DCR_RESULTS_AB_SIDE));
}

dcr_status_t dcr_results_ab_pair(const dcr_results_set_t *set, size_t *a_p, size_t *b_p)
{
    for (size_t i = set->nruns; i-- > 1;) {
        const char *b = ab_side(&set->runs[i]), *a = ab_side(&set->runs[i - 1]);
        if (!b || strcmp(b, "B")) continue;
        if (!a || strcmp(a, "A"))
            return dcr_error_set(DCR_EINVAL,
                                 "%s: %s is side B of an A/B run but %s is not its "
                                 "side A",
                                 set->path, set->runs[i].name, set->runs[i - 1].name);
        for (size_t k = i - 1; k <= i; k++)
            if (!dcr_results_column(&set->runs[k], DCR_RESULTS_BLOCK))
                return dcr_error_set(DCR_EINVAL, "%s: %s has no refits/%s column", set->path,
                                     set->runs[k].name, DCR_RESULTS_BLOCK);
        *a_p = i - 1;
        *b_p = i;
        return DCR_OK;
    }
    return dcr_error_set(DCR_EINVAL,
                         "%s holds no interleaved A/B run (dcr bench --ab --out writes one); "
                         "two files compare as dcr compare BASE.h5 NEW.h5",
                         set->path);
}

static char *dup_text(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Run dst: src's attributes and its refits rows[0..n) (block `id`). */
static dcr_status_t copy_rows(const dcr_results_stored_run_t *src, const size_t *rows, size_t n,
                              long id, dcr_results_stored_run_t *dst)
{
    char name[256];
    snprintf(name, sizeof(name), "%s#block%ld", src->name, id);
    *dst = (dcr_results_stored_run_t){.name = strdup(name),
                                      .command = dup_text(src->command),
                                      .config_text = dup_text(src->config_text),
                                      .summary_text = dup_text(src->summary_text),
                                      .machine = dup_text(src->machine),
                                      .git_revision = dup_text(src->git_revision),
                                      .time = dup_text(src->time),
                                      .config = json_incref(src->config),
                                      .summary = json_incref(src->summary),
                                      .config_key = dup_text(src->config_key),
                                      .nrefits = n,
                                      .ncolumns = src->ncolumns,
                                      .columns = calloc(src->ncolumns, sizeof(*dst->columns))};
    bool ok = dst->name && dst->command && dst->config_text && dst->summary_text && dst->machine &&
              dst->git_revision && dst->time && dst->config_key && dst->columns;
    for (size_t c = 0; ok && c < src->ncolumns; c++) {
        dst->columns[c].name = strdup(src->columns[c].name);
        dst->columns[c].values = malloc((n ? n : 1) * sizeof(double));
        ok = dst->columns[c].name && dst->columns[c].values;
        for (size_t i = 0; ok && i < n; i++)
            dst->columns[c].values[i] = src->columns[c].values[rows[i]];
    }
    return ok ? DCR_OK : dcr_error_set(DCR_ENOMEM, "splitting %s into blocks", src->name);
}

static int cmp_block_id(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The distinct block ids of a column, sorted, into ids (n values at most). */
static size_t distinct_ids(const double *col, size_t n, double *ids)
{
    memcpy(ids, col, n * sizeof(double));
    qsort(ids, n, sizeof(double), cmp_block_id);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || ids[k - 1] != ids[i]) ids[k++] = ids[i];
    return k;
}

static dcr_status_t split_into(const dcr_results_stored_run_t *r, const double *col,
                               dcr_results_set_t *out, double *ids, size_t *rows)
{
    size_t nids = distinct_ids(col, r->nrefits, ids);
    out->runs = calloc(nids ? nids : 1, sizeof(*out->runs));
    if (!out->runs) return dcr_error_set(DCR_ENOMEM, "splitting %s into blocks", r->name);
    for (size_t b = 0; b < nids; b++) {
        size_t n = 0;
        for (size_t i = 0; i < r->nrefits; i++)
            if (col[i] == ids[b]) rows[n++] = i;
        out->nruns++;
        DCR_CHECK(copy_rows(r, rows, n, (long)ids[b], &out->runs[b]));
    }
    return DCR_OK;
}

dcr_status_t dcr_results_split_blocks(const dcr_results_set_t *set, size_t run,
                                      dcr_results_set_t **out_p)
{
    const dcr_results_stored_run_t *r = &set->runs[run];
    const double *col = dcr_results_column(r, DCR_RESULTS_BLOCK);
    if (!col)
        return dcr_error_set(DCR_EINVAL, "%s: %s has no refits/%s column", set->path, r->name,
                             DCR_RESULTS_BLOCK);
    for (size_t i = 0; i < r->nrefits; i++)
        if (col[i] != floor(col[i]) || col[i] > 1e9)
            return dcr_error_set(DCR_EINVAL, "%s: %s: block id %g is not a whole number", set->path,
                                 r->name, col[i]);
    dcr_results_set_t *out = calloc(1, sizeof(*out));
    double *ids = malloc((r->nrefits + 1) * sizeof(double));
    size_t *rows = malloc((r->nrefits + 1) * sizeof(size_t));
    dcr_status_t st = out && ids && rows && (out->path = strdup(set->path))
                          ? split_into(r, col, out, ids, rows)
                          : dcr_error_set(DCR_ENOMEM, "splitting %s into blocks", r->name);
    free(ids);
    free(rows);
    if (st != DCR_OK) {
        dcr_results_set_destroy(out);
        return st;
    }
    *out_p = out;
    return DCR_OK;
}
