# Spack recipe for mnddp (packaging/spack/README.md says how to use it and what was checked).
#
# Package API v2 (Spack >= 1.0 with the spack/spack-packages "builtin" repo). For Package API v1
# (Spack <= 0.23) the two spack_repo imports become `from spack.build_systems.cmake import
# CMakeBuilder`; `from spack.package import *` then brings CMakePackage, CudaPackage and generator.

from spack_repo.builtin.build_systems.cmake import CMakeBuilder, CMakePackage, generator
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *


class Mnddp(CMakePackage, CudaPackage):
    """mnddp: data-parallel training of LibTorch models across MPI ranks (gradients averaged over
    NCCL on GPUs, over MPI on CPUs), reading HDF5 training shards and writing parallel-HDF5
    checkpoints. One rank per GPU or CPU slot, started by mpirun or srun."""

    # The project has no public repository yet: a site points `git` at its own mirror of the
    # source (spack install mnddp@main), or builds a checkout with `spack dev-build`
    # (packaging/spack/README.md). A release will be pinned by commit, as py-torch's are.
    homepage = "https://example.invalid/mnddp"
    git = "https://example.invalid/mnddp.git"

    version("main", branch="main")

    variant(
        "tests",
        default=False,
        description="Build the GoogleTest suite (MNDDP_BUILD_TESTS); `spack install --test=root` "
        "runs its `unit` label",
    )
    variant(
        "bench",
        default=False,
        description="Build the benchmarks in bench/ (they stay in the build tree)",
    )
    variant(
        "tcmalloc",
        default=True,
        description="Link the mnddp executable against gperftools' tcmalloc_minimal "
        "(MNDDP_HOST_ALLOCATOR=tcmalloc; 5-15% faster CPU steps than glibc malloc)",
    )

    # The project's own scripts configure with -G Ninja; Spack's CMakePackage default is make.
    generator("ninja", "make", default="ninja")

    # As py-torch: a CUDA build must name its GPUs (cuda_arch=90 for H100).
    conflicts(
        "cuda_arch=none",
        when="+cuda",
        msg="Name the CUDA compute capability of your GPUs, e.g. cuda_arch=90 for H100",
    )

    depends_on("c", type="build")  # project(mnddp LANGUAGES C CXX); bench/host_wait_counter.c
    depends_on("cxx", type="build")  # C++20
    depends_on("cmake@3.25:", type="build")  # cmake_minimum_required(VERSION 3.25)
    depends_on("help2man", type="build")  # man pages from each command's --help

    depends_on("mpi")
    # Parallel HDF5, tested with 1.10 (Debian 12). The project reads HDF5 2.x's
    # HDF5_PROVIDES_PARALLEL too, but has not been built against 2.x: stay on 1.x until it is.
    depends_on("hdf5@1.10:1 +mpi")
    depends_on("boost@1.70: +program_options")
    depends_on("fmt")
    depends_on("spdlog")
    depends_on("nlohmann-json@3.9:")
    depends_on("xxhash@0.8:")  # XXH3-64 block checksums (format-2 checkpoints)
    # protoc at build time (protobuf_generate) and libprotobuf at link time.
    # py-torch~custom-protobuf pins protobuf@3.13.0, and one DAG has one protobuf, so that is
    # what this gets by default.
    depends_on("protobuf")
    depends_on("zlib-api")  # find_package(ZLIB): CRC-32 of format-1 checkpoints
    depends_on("gperftools", when="+tcmalloc")

    # LibTorch is the C++ half of the torch Python package: mnddp builds against
    # <site-packages>/torch/{include,lib,share/cmake/Torch} of Spack's py-torch. "build" makes
    # py-torch's run environment (PYTHONPATH with torch, TORCH_CUDA_ARCH_LIST) part of the build
    # environment, so the configure-time `MNDDP_PYTHON -c "import torch..."` probes work.
    # Tested with torch 2.11 (scripts/requirements.txt); 2.7 is the first with the C++11 ABI that
    # the project assumes (cmake/MnddpDependencies.cmake).
    with default_args(type=("build", "link", "run")):
        depends_on("py-torch@2.7:")
        depends_on("py-torch~cuda~rocm", when="~cuda")
        depends_on("py-torch+cuda", when="+cuda")

    with when("+cuda"):
        # CudaPackage adds depends_on("cuda") already. mnddp links the CUDA runtime and NCCL
        # itself; py-torch+cuda+nccl links Spack's nccl too (USE_SYSTEM_NCCL=ON), and the DAG
        # has one nccl node, so a process maps one libnccl, as MnddpCuda.cmake wants.
        depends_on("nccl@2.18:")  # tested with 2.28 (the torch 2.11 wheel's); 2.18 is a guess
        # Forward cuda_arch, as lbann/aluminum/ams do for their CUDA dependencies.
        for arch in CudaPackage.cuda_arch_values:
            depends_on(f"py-torch+cuda cuda_arch={arch}", when=f"cuda_arch={arch}")
            depends_on(f"nccl+cuda cuda_arch={arch}", when=f"cuda_arch={arch}")

    # Configure-time dependency when tests are built (+tests, or `spack install --test=root`).
    depends_on("googletest", type=("build", "link"), when="+tests")
    depends_on("googletest", type="test")

    @property
    def _build_tests(self):
        return self.spec.satisfies("+tests") or self.run_tests

    def cmake_args(self):
        spec = self.spec
        torch = spec["py-torch"]
        args = [
            # The Python whose torch provides LibTorch: py-torch's own interpreter.
            self.define("MNDDP_PYTHON", torch["python"].command.path),
            # ...and torch's CMake directory outright, as redis-ai does
            # (py-torch.cmake_prefix_paths[0] is <platlib>/torch/share/cmake), so the build does
            # not depend on the import probe. MnddpDependencies.cmake skips the probe when set.
            self.define("Torch_DIR", join_path(torch.package.cmake_prefix_paths[0], "Torch")),
            self.define("MNDDP_WITH_CUDA", "ON" if spec.satisfies("+cuda") else "OFF"),
            self.define("MNDDP_BUILD_TESTS", self._build_tests),
            self.define_from_variant("MNDDP_BUILD_BENCH", "bench"),
            self.define(
                "MNDDP_HOST_ALLOCATOR", "tcmalloc" if spec.satisfies("+tcmalloc") else "system"
            ),
            # MNDDP_CCACHE is a find_program() result, not an option: a value that is not
            # *-NOTFOUND stops the search and, being false, keeps ccache out (as
            # scripts/device_check.sh does). Spack has its own ccache setting (config:ccache).
            self.define("MNDDP_CCACHE", False),
            # A precompiled header saves little in a one-shot build and is one more thing for a
            # compiler wrapper to get wrong.
            self.define("MNDDP_USE_PCH", False),
            self.define("MNDDP_SANITIZE", ""),
            self.define("MNDDP_FUZZ", False),
            # FindMPI through the MPI package's wrappers (as alps, amr-wind do).
            self.define("MPI_C_COMPILER", spec["mpi"].mpicc),
            self.define("MPI_CXX_COMPILER", spec["mpi"].mpicxx),
        ]
        if self._build_tests:
            # The mpi/e2e tests run mpiexec (as adios2 passes it).
            args.append(
                self.define("MPIEXEC_EXECUTABLE", join_path(spec["mpi"].prefix.bin, "mpiexec"))
            )
        if spec.satisfies("+cuda"):
            # Spack's py-torch has no nvidia-* wheels beside it, so MnddpCuda.cmake takes the
            # toolkit's runtime (find_package(CUDAToolkit)) and NCCL from the search path; pin both
            # to the DAG's packages.
            args.extend(
                [
                    self.define("CUDAToolkit_ROOT", spec["cuda"].prefix),
                    self.define("MNDDP_NCCL_INCLUDE", spec["nccl"].prefix.include),
                    self.define("MNDDP_NCCL_LIB", spec["nccl"].libs[0]),
                    # Unused by mnddp today (no CUDA language); passed as scripts/device_check.sh
                    # does, so a future enable_language(CUDA) gets the right architectures.
                    CMakeBuilder.define_cuda_architectures(self),
                ]
            )
        return args

    def check(self):
        """Build-time tests (`spack install --test=root`): the single-process GoogleTest binaries
        (label `unit`: no mpiexec, GPU or Python needed)."""
        if not self._build_tests:
            return
        with working_dir(self.build_directory):
            ctest("-L", "unit", "--output-on-failure", "-j", str(make_jobs))

    @run_after("install")
    @on_package_attributes(run_tests=True)
    def check_installed_programs(self):
        """The installed programs start and find their libraries; `mnddp version` lists them."""
        Executable(self.prefix.bin.mnddp)("version", output=str, error=str)
        Executable(self.prefix.bin.join("mnddp-data"))("--help", output=str, error=str)
