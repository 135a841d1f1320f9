// main() of the GoogleTest programs that run under mpirun: MPI_Init before the tests, one rank
// prints (the others still fail the run through their exit code), MPI_Finalize after.
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  }
  int result = RUN_ALL_TESTS();
  MPI_Finalize();
  return result;
}
