// --deterministic: bitwise-reproducible runs. Set before any torch computation.
#pragma once

namespace mnddp {

// Torch's deterministic algorithms (an op without one fails, naming itself), cuDNN deterministic
// and not benchmarking, cuBLAS's fixed workspace (CUBLAS_WORKSPACE_CONFIG=:4096:8), and MKL's strict
// conditional numerical reproducibility (MKL_CBWR=AUTO,STRICT), under which CPU matrix products do
// not depend on the thread count on Intel CPUs. Environment variables the user set are left as they are.
void make_deterministic();

// Off Intel CPUs MKL's strict mode does not hold: its matrix products then run on one thread on the
// calling thread (the one that trains). Call after at::set_num_threads, which undoes it.
void keep_matrix_products_thread_invariant();

}  // namespace mnddp
