/* HDF5 results writer. HDF5's error stack is silenced: every failure becomes
 * one dcr error line naming the file and the object. */
#include "workloads/harness/results.h"

#include <hdf5.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "dcr/outpath.h"

const char *const dcr_results_column_names[DCR_RESULTS_NCOLUMNS] = {
    [DCR_RESULTS_LATENCY_S] = "latency_s",
    [DCR_RESULTS_PAYLOAD_BYTES] = "payload_bytes",
    [DCR_RESULTS_CROSS_BYTES] = "cross_bytes",
    [DCR_RESULTS_RAW_CHANGED_VALUE_BYTES] = "raw_changed_value_bytes",
    [DCR_RESULTS_CHANGED_ELEMENTS] = "changed_elements",
    [DCR_RESULTS_BIT_EXACT] = "bit_exact",
    [DCR_RESULTS_CONSTRUCTION_LB_S] = "construction_lb_s",
    [DCR_RESULTS_TRANSPORT_LB_S] = "transport_lb_s",
    [DCR_RESULTS_FINALIZATION_S] = "finalization_s",
};

const char *const dcr_results_attr_names[DCR_RESULTS_NATTRS] = {
    [DCR_RESULTS_ATTR_COMMAND] = "command",           [DCR_RESULTS_ATTR_CONFIG] = "config",
    [DCR_RESULTS_ATTR_SUMMARY] = "summary",           [DCR_RESULTS_ATTR_MACHINE] = "machine",
    [DCR_RESULTS_ATTR_GIT_REVISION] = "git_revision", [DCR_RESULTS_ATTR_TIME] = "time",
};

const char *dcr_results_git_revision(void)
{
    return DCR_GIT_REVISION;
}

static herr_t write_string_attr(hid_t obj, const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(value) + 1);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = attr < 0 ? -1 : H5Awrite(attr, type, value);
    if (attr >= 0) H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
    return rc;
}

/* Opens an existing results file (checking its version) or creates one:
 * `path` is the output-path rule's temporary copy, empty for a new file. */
/* The file holds this schema's version attribute, equal to
 * DCR_RESULTS_VERSION, and its runs group. */
static bool schema_ok(hid_t f)
{
    if (H5Aexists(f, DCR_RESULTS_VERSION_ATTR) <= 0 ||
        H5Lexists(f, DCR_RESULTS_RUNS, H5P_DEFAULT) <= 0)
        return false;
    int version = 0;
    hid_t attr = H5Aopen(f, DCR_RESULTS_VERSION_ATTR, H5P_DEFAULT);
    bool ok =
        attr >= 0 && H5Aread(attr, H5T_NATIVE_INT, &version) >= 0 && version == DCR_RESULTS_VERSION;
    if (attr >= 0) H5Aclose(attr);
    return ok;
}

static hid_t open_results(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size == 0) {
        hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        if (f < 0) return -1;
        int version = DCR_RESULTS_VERSION;
        hid_t space = H5Screate(H5S_SCALAR);
        hid_t attr = H5Acreate2(f, DCR_RESULTS_VERSION_ATTR, H5T_NATIVE_INT, space, H5P_DEFAULT,
                                H5P_DEFAULT);
        H5Awrite(attr, H5T_NATIVE_INT, &version);
        H5Aclose(attr);
        H5Sclose(space);
        hid_t runs = H5Gcreate2(f, DCR_RESULTS_RUNS, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Gclose(runs);
        return f;
    }
    if (H5Fis_hdf5(path) <= 0) return -2;
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) return -1;
    if (!schema_ok(f)) {
        H5Fclose(f);
        return -2;
    }
    return f;
}

static void machine_text(char *buf, size_t len)
{
    struct utsname u;
    if (uname(&u) != 0) memset(&u, 0, sizeof(u));
    snprintf(buf, len, "%s %s %s %s, %ld cores", u.sysname, u.nodename, u.release, u.machine,
             sysconf(_SC_NPROCESSORS_ONLN));
}

static herr_t write_column(hid_t group, const dcr_results_column_t *c, size_t n)
{
    hsize_t dims[1] = {n};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t ds =
        H5Dcreate2(group, c->name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc =
        ds < 0 ? -1 : H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, c->values);
    if (ds >= 0) H5Dclose(ds);
    H5Sclose(space);
    return rc;
}

/* The stage trace as an [n, 6] int64 table; its columns are named in an attribute. */
static herr_t write_intervals(hid_t g, const dcr_results_run_t *run)
{
    hsize_t dims[2] = {run->nintervals, 6};
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t ds = H5Dcreate2(g, DCR_RESULTS_INTERVALS, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                          H5P_DEFAULT);
    herr_t rc =
        ds < 0 ? -1 : H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, run->intervals);
    if (ds >= 0) {
        rc |= write_string_attr(ds, "columns", DCR_RESULTS_INTERVAL_COLUMNS);
        H5Dclose(ds);
    }
    H5Sclose(space);
    return rc;
}

static herr_t write_run(hid_t f, const dcr_results_run_t *run, char *name_out, size_t name_len)
{
    hid_t runs = H5Gopen2(f, DCR_RESULTS_RUNS, H5P_DEFAULT);
    if (runs < 0) return -1;
    H5G_info_t info;
    H5Gget_info(runs, &info);
    char name[32], machine[512], when[32];
    snprintf(name, sizeof(name), "%06llu", (unsigned long long)info.nlinks);
    hid_t g = H5Gcreate2(runs, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(runs);
    if (g < 0) return -1;
    time_t now = time(NULL);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    machine_text(machine, sizeof(machine));
    const char *attrs[DCR_RESULTS_NATTRS] = {
        [DCR_RESULTS_ATTR_COMMAND] = run->command,
        [DCR_RESULTS_ATTR_CONFIG] = run->config_json,
        [DCR_RESULTS_ATTR_SUMMARY] = run->summary_json ? run->summary_json : "{}",
        [DCR_RESULTS_ATTR_MACHINE] = machine,
        [DCR_RESULTS_ATTR_GIT_REVISION] =
            run->git_revision ? run->git_revision : dcr_results_git_revision(),
        [DCR_RESULTS_ATTR_TIME] = when,
    };
    herr_t rc = 0;
    for (int k = 0; k < DCR_RESULTS_NATTRS; k++)
        rc |= write_string_attr(g, dcr_results_attr_names[k], attrs[k]);
    hid_t refits = H5Gcreate2(g, DCR_RESULTS_REFITS, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    for (size_t i = 0; refits >= 0 && i < run->ncolumns; i++)
        rc |= write_column(refits, &run->columns[i], run->nrefits);
    if (run->nintervals && run->intervals) rc |= write_intervals(g, run);
    if (refits >= 0) H5Gclose(refits);
    H5Gclose(g);
    snprintf(name_out, name_len, "/runs/%s", name);
    return refits < 0 ? -1 : rc;
}

dcr_status_t dcr_results_check(const char *flag, const char *path)
{
    DCR_CHECK(dcr_outpath_check(flag, path));
    struct stat st;
    if (lstat(path, &st) != 0 || st.st_size == 0) return DCR_OK; /* a new file */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    bool ok = H5Fis_hdf5(path) > 0;
    hid_t f = ok ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    ok = f >= 0 && schema_ok(f);
    if (f >= 0) H5Fclose(f);
    if (!ok)
        return dcr_error_set(DCR_EINVAL, "%s %s: exists and is not a dcr results file (version %d)",
                             flag, path, DCR_RESULTS_VERSION);
    return DCR_OK;
}

dcr_status_t dcr_results_append(const char *path, const dcr_results_run_t *run, char *name_out,
                                size_t name_len)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* The output-path rule (dcr/outpath.h): the run is appended to a copy
     * beside the file, which replaces it only when complete, so a failed or
     * interrupted append leaves the earlier runs as they were. */
    dcr_outfile_t *of = NULL;
    DCR_CHECK(dcr_outfile_open("results", path, DCR_OUTFILE_KEEP, &of));
    hid_t f = open_results(dcr_outfile_tmp_path(of));
    dcr_status_t st = DCR_OK;
    if (f == -2)
        st = dcr_error_set(DCR_EINVAL,
                           "results %s: exists and is not a dcr results file (version %d)", path,
                           DCR_RESULTS_VERSION);
    else if (f < 0)
        st = dcr_error_set(DCR_EIO, "results %s: HDF5 cannot open or create it", path);
    if (st == DCR_OK) {
        herr_t rc = write_run(f, run, name_out, name_len);
        herr_t closed = H5Fclose(f);
        if (rc < 0 || closed < 0)
            st = dcr_error_set(DCR_EIO, "results %s: HDF5 failed writing a run (disk full?)", path);
    }
    if (st != DCR_OK) {
        dcr_outfile_abort(of);
        return st;
    }
    return dcr_outfile_commit(of);
}
