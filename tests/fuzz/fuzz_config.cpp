// Fuzz harness: the INI file and command-line parser. The first byte chooses the form: an INI text
// (read through --config, as a user's file is) or arguments separated by NUL bytes. Bad input must be
// one UsageError; anything else escaping (std::out_of_range, a crash) is a finding. An accepted
// configuration must come back exactly from the text rank 0 broadcasts to the others.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "mnddp/config.hpp"
#include "mnddp/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 64 * 1024) return -1;
  const bool ini = data[0] % 2 == 0;
  std::vector<std::string> args;
  std::optional<mnddp::fuzz::MemoryFile> file;
  if (ini) {
    file.emplace(data + 1, size - 1);
    args = {"--config", file->path()};
  } else {
    std::string current;
    for (std::size_t i = 1; i < size; ++i) {
      if (data[i] == 0) {
        args.push_back(current);
        current.clear();
      } else {
        current += static_cast<char>(data[i]);
      }
    }
    args.push_back(current);
  }
  mnddp::TrainingConfig config;
  try {
    // --train-data has no default: given through the environment, the input's own wins, and the
    // rules after it are reached.
    config = mnddp::parse_command_line(args, {{"MNDDP_TRAIN_DATA", "train_*.h5"}}).config;
  } catch (const mnddp::UsageError&) {
    return 0;
  }
  if (mnddp::parse_ini_text(mnddp::to_ini(config)) != config) std::abort();  // the broadcast lost a value
  return 0;
}
