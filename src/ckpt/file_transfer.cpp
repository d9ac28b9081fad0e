// File transfers between ranks: a size, then pieces each announced by a flag, so that a sender that
// cannot read on tells its receiver instead of leaving it waiting.
#include "mnddp/ckpt/file_transfer.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "mnddp/check.hpp"
#include "mnddp/error.hpp"

namespace fs = std::filesystem;

namespace mnddp {
namespace {

constexpr int kControlTag = 7301;
constexpr int kDataTag = 7302;
constexpr std::size_t kPiece = 64u << 20;  // below MPI's int count, large enough to stream at memory speed

// A file descriptor closed however we leave.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Blocking point-to-point. (Nonblocking calls completed by MPI_Test polls from this thread, with
// sleeps between them to spare the training thread a core, left a --zero job hung in its partner
// copies on the local test cluster: Open MPI 4.1 over UCX with a second thread in MPI.)
void send_bytes(MpiComm& comm, const void* data, std::size_t bytes, int to, int tag) {
  MNDDP_MPI_CHECK(MPI_Send(data, static_cast<int>(bytes), MPI_BYTE, to, tag, comm.handle()));
}

void receive_bytes(MpiComm& comm, void* data, std::size_t bytes, int from, int tag) {
  MNDDP_MPI_CHECK(MPI_Recv(data, static_cast<int>(bytes), MPI_BYTE, from, tag, comm.handle(), MPI_STATUS_IGNORE));
}

void send_flag(MpiComm& comm, std::int64_t value, int to) { send_bytes(comm, &value, sizeof(value), to, kControlTag); }

std::int64_t receive_flag(MpiComm& comm, int from) {
  std::int64_t value = 0;
  receive_bytes(comm, &value, sizeof(value), from, kControlTag);
  return value;
}

}  // namespace

std::uint64_t send_file(MpiComm& comm, const std::string& path, int to) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat info {};
  const bool readable = fd.get() >= 0 && ::fstat(fd.get(), &info) == 0 && S_ISREG(info.st_mode);
  const std::string why = readable ? std::string() : std::strerror(errno);
  const std::int64_t size = readable ? static_cast<std::int64_t>(info.st_size) : -1;
  const CollectiveScope scope(comm.tracker(), "send file", readable ? static_cast<std::size_t>(size) : 0);
  send_flag(comm, size, to);
  if (!readable) throw Error(fmt::format("cannot read '{}' to send it to rank {}: {}", path, to, why));
  std::vector<char> piece(std::min<std::size_t>(kPiece, static_cast<std::size_t>(size)));
  for (std::int64_t done = 0; done < size;) {
    const std::size_t want = std::min<std::size_t>(piece.size(), static_cast<std::size_t>(size - done));
    const ssize_t got = ::pread(fd.get(), piece.data(), want, done);
    if (got != static_cast<ssize_t>(want)) {
      const std::string error = got < 0 ? std::strerror(errno) : "the file shrank";
      send_flag(comm, 0, to);
      throw Error(fmt::format("cannot read '{}' to send it to rank {}: {}", path, to, error));
    }
    send_flag(comm, 1, to);
    send_bytes(comm, piece.data(), want, to, kDataTag);
    done += static_cast<std::int64_t>(want);
  }
  return static_cast<std::uint64_t>(size);
}

std::uint64_t receive_file(MpiComm& comm, int from, const std::string& path) {
  const CollectiveScope scope(comm.tracker(), "receive file", 0);
  const std::int64_t size = receive_flag(comm, from);
  if (size < 0) throw Error(fmt::format("rank {} could not send its copy for '{}'", from, path));
  // A failure to write still drains the sender's pieces, so that it does not wait for us forever.
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  std::optional<std::string> failure;
  if (fd.get() < 0) failure = fmt::format("cannot create '{}': {}", path, std::strerror(errno));
  std::vector<char> piece(std::min<std::size_t>(kPiece, static_cast<std::size_t>(size)));
  for (std::int64_t done = 0; done < size;) {
    if (receive_flag(comm, from) != 1) {
      failure = fmt::format("rank {} could not read its copy for '{}' to the end", from, path);
      break;
    }
    const std::size_t want = std::min<std::size_t>(piece.size(), static_cast<std::size_t>(size - done));
    receive_bytes(comm, piece.data(), want, from, kDataTag);
    if (!failure && ::pwrite(fd.get(), piece.data(), want, done) != static_cast<ssize_t>(want))
      failure = fmt::format("cannot write '{}': {}", path, std::strerror(errno));
    done += static_cast<std::int64_t>(want);
  }
  if (failure) {
    std::error_code ignored;
    if (fd.get() >= 0) fs::remove(path, ignored);
    throw Error(*failure);
  }
  return static_cast<std::uint64_t>(size);
}

}  // namespace mnddp
