/* A failing disk for the tests, by LD_PRELOAD: every read of the file whose name ends with
 * $MNDDP_TEST_EIO_FILE fails with EIO (read, pread, pread64), everything else reads normally. Used
 * to show that an I/O error while verifying a checkpoint leaves it in place instead of setting it
 * aside as corrupt (tests/e2e/checkpoint_retention.sh). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int is_failing(int fd) {
  const char* suffix = getenv("MNDDP_TEST_EIO_FILE");
  if (suffix == NULL || *suffix == '\0') return 0;
  char link[64];
  char path[4096];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof(path) - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  const size_t length = strlen(suffix);
  return (size_t)n >= length && strcmp(path + n - length, suffix) == 0;
}

ssize_t read(int fd, void* buffer, size_t count) {
  static ssize_t (*real)(int, void*, size_t) = NULL;
  if (real == NULL) real = (ssize_t(*)(int, void*, size_t))dlsym(RTLD_NEXT, "read");
  if (is_failing(fd)) {
    errno = EIO;
    return -1;
  }
  return real(fd, buffer, count);
}

ssize_t pread(int fd, void* buffer, size_t count, off_t offset) {
  static ssize_t (*real)(int, void*, size_t, off_t) = NULL;
  if (real == NULL) real = (ssize_t(*)(int, void*, size_t, off_t))dlsym(RTLD_NEXT, "pread");
  if (is_failing(fd)) {
    errno = EIO;
    return -1;
  }
  return real(fd, buffer, count, offset);
}

ssize_t pread64(int fd, void* buffer, size_t count, off64_t offset) {
  static ssize_t (*real)(int, void*, size_t, off64_t) = NULL;
  if (real == NULL) real = (ssize_t(*)(int, void*, size_t, off64_t))dlsym(RTLD_NEXT, "pread64");
  if (is_failing(fd)) {
    errno = EIO;
    return -1;
  }
  return real(fd, buffer, count, offset);
}
