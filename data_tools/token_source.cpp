// Flat token files as nanoGPT's prepare.py writes them (train.bin: uint16 or uint32 ids, native
// little-endian, no header), cut into consecutive sequences of a fixed length. Read by position with
// pread, so a corpus of any size converts in bounded memory.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mnddp/error.hpp"
#include "sources.hpp"

namespace mnddp::tools {
namespace {

class TokenSource final : public SampleSource {
 public:
  TokenSource(const std::string& path, SampleType type, std::int64_t length) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat info {};
    if (fd_ < 0 || ::fstat(fd_, &info) != 0)
      throw UsageError(fmt::format("--tokens: cannot read '{}': {}", path, std::strerror(errno)));
    const std::size_t size = sample_type_size(type);
    if (static_cast<std::size_t>(info.st_size) % size != 0)
      throw UsageError(fmt::format("--tokens '{}': {} bytes is not a whole number of {} tokens", path, info.st_size,
                                   sample_type_name(type)));
    const std::int64_t tokens = info.st_size / static_cast<std::int64_t>(size);
    x_type = type;
    sample_shape = {length};
    num_samples = tokens / length;
    row_bytes_ = static_cast<std::size_t>(length) * size;
    description = fmt::format("token file '{}' ({} {} tokens; {} sequences of {}, {} tokens at the end left out)", path,
                              tokens, sample_type_name(type), num_samples, length, tokens % length);
  }
  ~TokenSource() override {
    if (fd_ >= 0) ::close(fd_);
  }
  TokenSource(const TokenSource&) = delete;
  TokenSource& operator=(const TokenSource&) = delete;

  void read(std::int64_t first, std::int64_t rows, void* x) override {
    auto* out = static_cast<unsigned char*>(x);
    std::size_t want = static_cast<std::size_t>(rows) * row_bytes_;
    auto offset = static_cast<off_t>(static_cast<std::size_t>(first) * row_bytes_);
    while (want > 0) {
      const ssize_t got = ::pread(fd_, out, want, offset);
      if (got <= 0)
        throw UsageError(fmt::format("--tokens: cannot read '{}' at byte {}: {}", path_, offset,
                                     got == 0 ? "unexpected end of file" : std::strerror(errno)));
      out += got;
      offset += got;
      want -= static_cast<std::size_t>(got);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::size_t row_bytes_ = 0;
};

}  // namespace

std::unique_ptr<SampleSource> open_token_source(const std::string& path, SampleType type, std::int64_t length) {
  if (type != SampleType::U16 && type != SampleType::U32)
    throw UsageError(fmt::format("--token-type: must be uint16 or uint32 (got '{}')", sample_type_name(type)));
  if (length < 2) throw UsageError(fmt::format("--sequence-length must be at least 2, got {}", length));
  auto source = std::make_unique<TokenSource>(path, type, length);
  if (source->num_samples < 1)
    throw UsageError(fmt::format("--tokens '{}': fewer tokens than one sequence of {}", path, length));
  return source;
}

}  // namespace mnddp::tools
