// Fuzz harness: the checkpoint reader and verifier on any file: opened, its attributes and arrays
// listed, every array read and checked against its stored checksum. A damaged file must be one
// mnddp Error ("not an mnddp checkpoint", "corrupt ..."), never a crash, a hang or a huge allocation.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_input.hpp"
#include "h5_quiet.hpp"
#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 1024 * 1024) return -1;
  mnddp::fuzz::quiet_hdf5();
  const mnddp::fuzz::MemoryFile file(data, size);
  try {
    const mnddp::CheckpointReader reader(file.path());
    for (const char* name : {"step", "format_version", "config"})
      if (reader.has_attribute(name)) (void)reader.attribute(name);
    for (const char* group : {"model", "optimizer", "buffers"}) (void)reader.list(group);
    reader.verify_all();
  } catch (const mnddp::Error& e) {
    if (std::getenv("MNDDP_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "%s\n", e.what());
  }
  return 0;
}
