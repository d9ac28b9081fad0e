// Shared pieces of the mnddp-data subcommands: argument parsing with --help, value parsers, and
// the signature every subcommand implements.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mnddp::tools {

namespace po = boost::program_options;

// Every subcommand: parses its own arguments, returns the process exit code, throws on errors.
int run_synth(std::span<const std::string> args);
int run_convert(std::span<const std::string> args);
int run_reshard(std::span<const std::string> args);
int run_inspect(std::span<const std::string> args);
int run_stats(std::span<const std::string> args);

// Parses a subcommand's arguments; prints usage and options and returns false on --help.
bool parse_arguments(std::span<const std::string> args, const po::options_description& options,
                     const po::positional_options_description& positional, const std::string& usage,
                     po::variables_map& values);

// "1,28,28" -> {1, 28, 28}; throws UsageError naming `option` otherwise.
std::vector<std::int64_t> parse_shape(const std::string& text, const std::string& option);

// Every file of every spec (directories, globs, list files), in order, no file twice.
std::vector<std::string> expand_all(const std::vector<std::string>& specs, const std::string& option);

// "none" -> 0, "gzip" -> `level` (checked to be 1-9); throws UsageError otherwise.
int gzip_level_of(const std::string& compression, int level);

// "<dir>/<prefix>_NNN.h5" for shard `number` of `count`, at least 3 digits.
std::string shard_path(const std::string& dir, const std::string& prefix, int number, int count);

// "<prefix>_NNN.h5" files in `dir` other than `outputs`: left by an earlier run with more shards,
// they would silently join a directory spec of the new dataset.
std::vector<std::string> stale_outputs(const std::string& dir, const std::string& prefix,
                                       const std::vector<std::string>& outputs);

// Checks `prefix` (a file name part) and returns the output paths of `shards` shards in `dir`.
// Refuses existing outputs, and stale ones from an earlier run, unless `overwrite`.
std::vector<std::string> plan_outputs(const std::string& dir, const std::string& prefix, int shards, bool overwrite);

// Creates `dir` when missing; throws UsageError naming `option` when it cannot.
void make_output_dir(const std::string& dir, const std::string& option);

}  // namespace mnddp::tools
