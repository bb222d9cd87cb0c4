/* ctest-labels: fuzz */
/* libFuzzer target for the S3 backend's XML readers (expat underneath):
 * every input is an answer body, read as a ListObjectsV2 page and for the
 * <Code> and <Message> of an error document. On success every entry is
 * read, so sanitizers see every byte the readers wrote. Seed inputs:
 * tests/engine/transport/fuzz_corpus/s3_*. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Fuzz targets see only public headers; the readers are internal. */
#include "transport/objstore-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dcr_objstore_page_t page = {0};
    size_t sum = 0;
    if (dcr__s3_parse_list((const char *)data, size, &page) == DCR_OK) {
        for (size_t i = 0; i < page.n; i++)
            sum += strlen(page.entries[i].key) + strlen(page.entries[i].version) +
                   (size_t)page.entries[i].size;
        sum += strlen(page.next);
    }
    free(page.entries);
    char code[64], msg[160];
    if (dcr__s3_xml_text((const char *)data, size, "Code", code, sizeof code)) sum += strlen(code);
    if (dcr__s3_xml_text((const char *)data, size, "Message", msg, sizeof msg)) sum += strlen(msg);
    return sum == 1 ? 0 : 0;
}
