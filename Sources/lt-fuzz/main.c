// lt-fuzz: the project's libFuzzer harnesses (Sources/FuzzTargets) in one program. The harness
// is chosen with LT_FUZZ_TARGET (json, selector, wkt, geo, multipart, revs, http, app).
//
// Built with `-sanitize=fuzzer` (scripts/fuzz.sh), libFuzzer drives it: this main hands over to
// LLVMFuzzerRunDriver. Built normally, it replays files instead: each argument is a file or a
// directory of files, each run once through the harness (the tests replay the committed corpus
// this way, so every input that once crashed stays a regression test).
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
// Present only when libFuzzer is linked in.
__attribute__((weak)) int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *, size_t));

static long replayed = 0;

static int replay_file(const char *path) {
    FILE *file = fopen(path, "rb");
    if (!file) { fprintf(stderr, "lt-fuzz: cannot open %s\n", path); return 1; }
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    uint8_t *data = malloc(size > 0 ? (size_t)size : 1);
    size_t got = fread(data, 1, (size_t)size, file);
    fclose(file);
    LLVMFuzzerTestOneInput(data, got);
    free(data);
    replayed++;
    return 0;
}

static int replay(const char *path) {
    struct stat info;
    if (stat(path, &info) != 0) { fprintf(stderr, "lt-fuzz: no such file or directory: %s\n", path); return 1; }
    if (!S_ISDIR(info.st_mode)) return replay_file(path);
    DIR *directory = opendir(path);
    if (!directory) return 1;
    struct dirent *entry;
    int failed = 0;
    while ((entry = readdir(directory))) {
        if (entry->d_name[0] == '.') continue;
        char child[4096];
        snprintf(child, sizeof child, "%s/%s", path, entry->d_name);
        failed |= replay(child);
    }
    closedir(directory);
    return failed;
}

__attribute__((weak)) int main(int argc, char **argv) {
    if (LLVMFuzzerRunDriver) return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput);
    LLVMFuzzerInitialize(&argc, &argv);
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') continue;  // libFuzzer's flags mean nothing here
        failed |= replay(argv[i]);
    }
    printf("lt-fuzz: %ld inputs replayed through %s\n", replayed, getenv("LT_FUZZ_TARGET") ? getenv("LT_FUZZ_TARGET") : "?");
    return failed;
}
