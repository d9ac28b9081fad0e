// MpiComm: blocking MPI collectives on a duplicated communicator, plus an asynchronous channel
// for all-reduces that overlap with computation.
#include "mnddp/comm/mpi_comm.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "mnddp/check.hpp"
#include "mpi_async.hpp"
#include "mpi_ops.hpp"

namespace mnddp {

using mpi_detail::kMaxChunk;

MPI_Datatype to_mpi(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::F64:
      return MPI_DOUBLE;
    case DType::F16:
      return MPI_UINT16_T;
    case DType::BF16:
      return MPI_UINT16_T;
    case DType::I32:
      return MPI_INT32_T;
    case DType::I64:
      return MPI_INT64_T;
    case DType::U8:
      return MPI_UINT8_T;
  }
  throw std::logic_error("to_mpi: unknown dtype");
}

MpiComm::MpiComm(MPI_Comm parent, const std::string& name, ChannelPace pace) : tracker_(name, pace), check_{name} {
  MNDDP_MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  // Errors come back as codes and become exceptions, instead of MPI aborting with its own text.
  MNDDP_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MNDDP_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MNDDP_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  // Made here, not on first use: duplicating is collective, and the first asynchronous call may come
  // from the autograd thread at a point the other ranks' main threads do not share.
  async_ = std::make_unique<mpi_detail::AsyncChannel>(comm_, name + "-async", pace);
}

MpiComm::~MpiComm() {
  async_.reset();  // joins the channel's thread before the communicators go
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

CollectiveScope MpiComm::enter(const char* op, std::size_t count, DType dtype, int root) {
  ++collectives_;
  CollectiveScope scope(tracker_, op, count * dtype_size(dtype));
  if (debug_collectives()) check_.verify(comm_, scope.seq(), op, dtype, count, root, CollectiveLabel::current());
  return scope;
}

void MpiComm::allreduce(void* buffer, std::size_t count, DType dtype, ReduceOp op) {
  const CollectiveScope scope = enter("allreduce", count, dtype);
  mpi_detail::check_reducible(dtype, op);
  auto* bytes = static_cast<char*>(buffer);
  const std::size_t element = dtype_size(dtype);
  const MPI_Op mpi_op = mpi_detail::reduce_op(op, dtype);
  for (std::size_t done = 0; done < count; done += kMaxChunk) {
    const std::size_t n = std::min(kMaxChunk, count - done);
    MNDDP_MPI_CHECK(
        MPI_Allreduce(MPI_IN_PLACE, bytes + done * element, static_cast<int>(n), to_mpi(dtype), mpi_op, comm_));
  }
  if (op == ReduceOp::Avg && size_ > 1) mpi_detail::divide_in_place(buffer, count, dtype, size_);
}

std::shared_ptr<CommWork> MpiComm::allreduce_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                   std::optional<CudaStream> producer) {
  ++collectives_;
  return async_->submit(mpi_detail::AsyncKind::AllReduce, buffer, count, dtype, op, producer);
}

std::shared_ptr<CommWork> MpiComm::reduce_scatter_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                        std::optional<CudaStream> producer) {
  ++collectives_;
  return async_->submit(mpi_detail::AsyncKind::ReduceScatter, buffer, count, dtype, op, producer);
}

void MpiComm::broadcast(void* buffer, std::size_t count, DType dtype, int root) {
  const CollectiveScope scope = enter("broadcast", count, dtype, root);
  auto* bytes = static_cast<char*>(buffer);
  const std::size_t element = dtype_size(dtype);
  for (std::size_t done = 0; done < count; done += kMaxChunk) {
    const std::size_t n = std::min(kMaxChunk, count - done);
    MNDDP_MPI_CHECK(MPI_Bcast(bytes + done * element, static_cast<int>(n), to_mpi(dtype), root, comm_));
  }
}

void MpiComm::allgather(const void* send, void* recv, std::size_t count, DType dtype) {
  const CollectiveScope scope = enter("allgather", count, dtype);
  if (count > kMaxChunk) throw std::invalid_argument("allgather: count exceeds the MPI int limit");
  const bool in_place =
      send == static_cast<const char*>(recv) + static_cast<std::size_t>(rank_) * count * dtype_size(dtype);
  MNDDP_MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : send, static_cast<int>(count), to_mpi(dtype), recv,
                                static_cast<int>(count), to_mpi(dtype), comm_));
}

void MpiComm::send_receive(const void* send, int to, void* recv, int from, std::size_t bytes) {
  const CollectiveScope scope = enter("sendrecv", bytes, DType::U8);
  const auto* out = static_cast<const char*>(send);
  auto* in = static_cast<char*>(recv);
  for (std::size_t done = 0; done < bytes; done += kMaxChunk) {
    const auto n = static_cast<int>(std::min(kMaxChunk, bytes - done));
    MNDDP_MPI_CHECK(
        MPI_Sendrecv(out + done, n, MPI_BYTE, to, 0, in + done, n, MPI_BYTE, from, 0, comm_, MPI_STATUS_IGNORE));
  }
}

void MpiComm::allreduce(ReductionMessage& message) {
  // Created on first use, after MPI_Init; MPI frees user ops at MPI_Finalize.
  static const MPI_Op combine = [] {
    MPI_Op op = MPI_OP_NULL;
    MNDDP_MPI_CHECK(MPI_Op_create(reinterpret_cast<MPI_User_function*>(&ReductionMessage::combine), 1, &op));
    return op;
  }();
  std::vector<unsigned char> wire = message.encode();
  const CollectiveScope scope = enter("allreduce", wire.size(), DType::U8);
  // One element spanning the whole message: MPI never hands the op a part of one.
  MPI_Datatype whole = MPI_DATATYPE_NULL;
  MNDDP_MPI_CHECK(MPI_Type_contiguous(static_cast<int>(wire.size()), MPI_BYTE, &whole));
  MNDDP_MPI_CHECK(MPI_Type_commit(&whole));
  const int rc = MPI_Allreduce(MPI_IN_PLACE, wire.data(), 1, whole, combine, comm_);
  MPI_Type_free(&whole);
  MNDDP_MPI_CHECK(rc);
  message.decode(wire);
}

ClockSync MpiComm::synchronise_clocks(int rounds) {
  constexpr int kTag = 7301;  // point-to-point on this communicator: never matches its collectives
  const CollectiveScope scope = enter("clock sync", static_cast<std::size_t>(rounds) * 16, DType::U8);
  auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  ClockSync sync;
  double best_round_trip = 1e30;
  for (int peer = 1; peer < size_; ++peer) {
    for (int round = 0; round < rounds; ++round) {
      if (rank_ == 0) {
        char ping = 0;
        MNDDP_MPI_CHECK(MPI_Recv(&ping, 1, MPI_CHAR, peer, kTag, comm_, MPI_STATUS_IGNORE));
        const double reply = now();
        MNDDP_MPI_CHECK(MPI_Send(&reply, 1, MPI_DOUBLE, peer, kTag, comm_));
      } else if (rank_ == peer) {
        const char ping = 0;
        const double sent = now();
        MNDDP_MPI_CHECK(MPI_Send(&ping, 1, MPI_CHAR, 0, kTag, comm_));
        double root_time = 0.0;
        MNDDP_MPI_CHECK(MPI_Recv(&root_time, 1, MPI_DOUBLE, 0, kTag, comm_, MPI_STATUS_IGNORE));
        const double received = now();
        if (received - sent < best_round_trip) {
          best_round_trip = received - sent;
          sync.offset_s = root_time - (sent + received) / 2;  // the reply left midway, seen from here
          sync.uncertainty_s = best_round_trip / 2;
        }
      }
    }
  }
  sync.base_s = rank_ == 0 ? now() : 0.0;
  MNDDP_MPI_CHECK(MPI_Bcast(&sync.base_s, 1, MPI_DOUBLE, 0, comm_));
  return sync;
}

void MpiComm::barrier() {
  const CollectiveScope scope = enter("barrier", 0, DType::U8);
  MNDDP_MPI_CHECK(MPI_Barrier(comm_));
}

}  // namespace mnddp
