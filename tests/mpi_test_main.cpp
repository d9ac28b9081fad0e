// gtest main for multi-rank tests: initialises MPI, insists on the expected rank count (a 2-rank
// test run with 1 rank is a failure, not a skip), prints results from rank 0 only, and all-reduces
// the verdict so every rank exits the same way. It insists on MPI_THREAD_MULTIPLE, as mnddp does.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // mnddp calls MPI from several threads: a test below that level would pass by luck, not by design.
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) std::fprintf(stderr, "FAILED: MPI gives thread level %d, not MPI_THREAD_MULTIPLE\n", provided);
    MPI_Finalize();
    return 1;
  }

  int expected = -1;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--expect-ranks=", 15) == 0) expected = std::atoi(argv[i] + 15);
  if (expected > 0 && expected != size) {
    if (rank == 0) std::fprintf(stderr, "FAILED: this test needs %d ranks but runs with %d\n", expected, size);
    MPI_Finalize();
    return 1;
  }

  testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  if (rank != 0 && failed) std::fprintf(stderr, "[rank %d] tests FAILED on this rank\n", rank);
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !failed) std::fprintf(stderr, "tests FAILED on another rank\n");
  MPI_Finalize();
  return any_failed;
}
