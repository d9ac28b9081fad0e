// Rank-aware spdlog setup.
#include "mnddp/log.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace mnddp {

void init_logging(const LogSetup& setup) {
  auto logger = std::make_shared<spdlog::logger>("mnddp", std::make_shared<spdlog::sinks::stdout_sink_mt>());
  logger->set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S.%e] [rank {}/{}] [%l] %v", setup.rank, setup.world_size));
  const auto configured = spdlog::level::from_str(std::string(choice_name(setup.level)));
  const bool full = setup.rank == 0 || setup.all_ranks;
  logger->set_level(full ? configured : std::max(configured, spdlog::level::warn));
  // The stdout sink flushes every line, so ranks' output interleaves by line under mpirun and srun.
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

}  // namespace mnddp
