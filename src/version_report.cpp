// `mnddp version`: built-with versions, then the loaded libraries (dl_iterate_phdr) and their own
// run-time versions (MPI_Get_library_version and H5get_libversion may be called before MPI_Init).
#include "mnddp/version_report.hpp"

#include <fmt/format.h>
#include <hdf5.h>
#include <link.h>
#include <mpi.h>

#include <filesystem>
#include <string>
#include <vector>

#include "mnddp/build_config.hpp"
#if MNDDP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#if MNDDP_HAVE_NCCL
#include "mnddp/comm/nccl_library.hpp"
#endif

namespace mnddp {
namespace {

std::vector<std::string> loaded_files() {
  std::vector<std::string> files;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')
          static_cast<std::vector<std::string>*>(out)->emplace_back(info->dlpi_name);
        return 0;
      },
      &files);
  return files;
}

// The loaded file whose name starts with `stem` ("libmpi.so" matches libmpi.so.40), resolved.
std::string loaded(const std::vector<std::string>& files, const std::string& stem) {
  for (const auto& file : files) {
    if (std::filesystem::path(file).filename().string().rfind(stem, 0) != 0) continue;
    std::error_code ec;
    const auto real = std::filesystem::canonical(file, ec);
    return ec ? file : real.string();
  }
  return "not loaded";
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  std::string version(text, static_cast<std::size_t>(length));
  // "Open MPI v4.1.4, package: Debian OpenMPI, ident: ...": the name and version, on one line.
  version = version.substr(0, version.find_first_of(",\n"));
  return version;
}

}  // namespace

std::string version_report(const char* allocator) {
  std::string out =
      fmt::format("mnddp {} (torch {}, HDF5 {}, CUDA {}, NCCL {}, {})\n", build::kVersion, build::kTorchVersion,
                  build::kHdf5Version, MNDDP_HAVE_CUDA ? "yes" : "no", MNDDP_HAVE_NCCL ? "yes" : "no", allocator);
  const auto files = loaded_files();
  const auto row = [&](const char* what, const std::string& version, const std::string& file) {
    out += fmt::format("  {:<22} {:<18} {}\n", what, version, file);
  };
  std::error_code ec;
  row("executable", build::kVersion, std::filesystem::read_symlink("/proc/self/exe", ec).string());
  row("torch (CPU half)", build::kTorchVersion, loaded(files, "libtorch_cpu.so"));
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  row("HDF5", fmt::format("{}.{}.{}", major, minor, release), loaded(files, "libhdf5"));
  row("MPI", mpi_library_version(), loaded(files, "libmpi.so"));
#if MNDDP_HAVE_CUDA
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);  // the runtime's own version: needs no driver and no GPU
  row("CUDA runtime", fmt::format("{}.{}", runtime / 1000, runtime % 1000 / 10), loaded(files, "libcudart.so"));
  row("torch (CUDA half)", "loaded on a GPU", build::kTorchCudaLibrary);
#endif
#if MNDDP_HAVE_NCCL
  const NcclLibrary nccl = loaded_nccl_library();
  row("NCCL", nccl_version_text(nccl.loaded_version), nccl.path.empty() ? loaded(files, "libnccl.so") : nccl.path);
#endif
  for (const auto& [what, stem] :
       std::vector<std::pair<const char*, const char*>>{{"Boost.Program_options", "libboost_program_options"},
                                                        {"spdlog", "libspdlog"},
                                                        {"fmt", "libfmt"},
                                                        {"protobuf", "libprotobuf"},
                                                        {"xxHash", "libxxhash"},
                                                        {"malloc", "libtcmalloc"},
                                                        {"C++ runtime", "libstdc++"}}) {
    const std::string file = loaded(files, stem);
    if (std::string(what) == "malloc" && file == "not loaded") continue;  // the system's: nothing to name
    row(what, "", file);
  }
  return out;
}

}  // namespace mnddp
