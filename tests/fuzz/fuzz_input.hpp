// Shared by the fuzz harnesses: the input as a file with a path, since mnddp's readers take paths.
// It lives in /dev/shm (memory: no disk, and removed at once) under a unique name; a memfd's
// /proc/self/fd path would do for text, but HDF5 resolves a file's real path and refuses it.
// MNDDP_FUZZ_DIR names a directory to use instead: run_fuzz.sh gives each test one and removes it,
// since an input that crashes HDF5 ends the process before this file is unlinked.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace mnddp::fuzz {

class MemoryFile {
 public:
  MemoryFile(const std::uint8_t* data, std::size_t size) {
    const char* directory = std::getenv("MNDDP_FUZZ_DIR");
    if (directory == nullptr || *directory == '\0') directory = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path_ = std::string(directory) + "/mnddp-fuzz-XXXXXX";
    const int fd = ::mkstemp(path_.data());
    if (fd < 0) std::abort();
    for (std::size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
  }
  ~MemoryFile() { ::unlink(path_.c_str()); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace mnddp::fuzz
