// mnddp-data: command-line tools for mnddp's HDF5 training data. One function per subcommand;
// the work itself lives in the mnddp_base library (src/data), shared with the trainer.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <boost/program_options.hpp>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "mnddp/data/shard_index.hpp"
#include "mnddp/data/synth.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace po = boost::program_options;

namespace mnddp {
namespace {

// Parses "1,28,28" into {1, 28, 28}.
std::vector<std::int64_t> parse_shape(const std::string& text) {
  std::vector<std::int64_t> shape;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = std::min(text.find(',', start), text.size());
    std::int64_t value = 0;
    const char* first = text.data() + start;
    const char* last = text.data() + comma;
    const auto [end, error] = std::from_chars(first, last, value);
    if (first == last || error != std::errc() || end != last || value < 1)
      throw UsageError(fmt::format("--shape: '{}' is not a comma-separated list of positive integers", text));
    shape.push_back(value);
    start = comma + 1;
  }
  return shape;
}

// Parses a subcommand's arguments; returns false when --help was printed instead.
bool parse_arguments(std::span<const std::string> args, const po::options_description& options,
                     const po::positional_options_description& positional, const std::string& usage,
                     po::variables_map& values) {
  po::store(po::command_line_parser(std::vector<std::string>(args.begin(), args.end()))
                .options(options)
                .positional(positional)
                .run(),
            values);
  if (values.count("help")) {
    std::cout << usage << "\n\n" << options << "\n";
    return false;
  }
  po::notify(values);
  return true;
}

int run_synth(std::span<const std::string> args) {
  SynthOptions synth;
  std::string shape = "1,28,28";
  po::options_description options("synth options");
  // clang-format off
  options.add_options()
      ("help,h", "show this help")
      ("out", po::value(&synth.out_dir)->required(), "output directory (created if missing)")
      ("train-samples", po::value(&synth.train_samples)->default_value(synth.train_samples), "training samples")
      ("val-samples", po::value(&synth.val_samples)->default_value(synth.val_samples), "validation samples (0: none)")
      ("shards", po::value(&synth.shards)->default_value(synth.shards),
       "training files; validation gets max(1, shards/2)")
      ("shape", po::value(&shape)->default_value(shape), "one sample's shape, comma-separated (e.g. 1,28,28 or 64)")
      ("classes", po::value(&synth.num_classes)->default_value(synth.num_classes), "number of classes")
      ("noise", po::value(&synth.noise)->default_value(synth.noise), "std of the noise around each class prototype")
      ("seed", po::value(&synth.seed)->default_value(synth.seed), "random seed (same seed, same files)")
      ("x-name", po::value(&synth.x_name)->default_value(synth.x_name), "name of the input dataset")
      ("y-name", po::value(&synth.y_name)->default_value(synth.y_name), "name of the label dataset")
      ("overwrite", po::bool_switch(&synth.overwrite), "replace an existing synthetic dataset in --out");
  // clang-format on
  po::variables_map values;
  if (!parse_arguments(args, options, {},
                       "usage: mnddp-data synth --out DIR [options]\n"
                       "Writes train_NNN.h5 and val_NNN.h5: Gaussian class prototypes plus noise.",
                       values))
    return kExitOk;
  synth.shape = parse_shape(shape);

  const auto files = write_synthetic_classification(synth);
  for (const auto& file : files) std::cout << file << "\n";
  std::cout << fmt::format("wrote {} training and {} validation samples of shape [{}] ({} classes) in {} files\n",
                           synth.train_samples, synth.val_samples, fmt::join(synth.shape, ", "), synth.num_classes,
                           files.size());
  return kExitOk;
}

std::string dims_text(hid_t space) {
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(0, H5Sget_simple_extent_ndims(space))));
  if (!dims.empty()) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

// One line per dataset, groups walked recursively: dtype, shape, chunking and filters.
herr_t describe_member(hid_t group, const char* name, const H5L_info_t* /*info*/, void* prefix_data) {
  const std::string path = *static_cast<const std::string*>(prefix_data) + name;
  H5Handle dataset(H5Oopen(group, name, H5P_DEFAULT));
  const H5I_type_t kind = dataset ? H5Iget_type(dataset.get()) : H5I_BADID;
  if (kind == H5I_GROUP) {
    std::string prefix = path + "/";
    hsize_t position = 0;
    return H5Literate(dataset.get(), H5_INDEX_NAME, H5_ITER_INC, &position, describe_member, &prefix);
  }
  if (kind != H5I_DATASET) {
    h5_take_error();
    std::cout << fmt::format("  {}: (not a dataset)\n", path);
    return 0;
  }
  H5Handle type(H5Dget_type(dataset.get()));
  H5Handle space(H5Dget_space(dataset.get()));
  H5Handle create(H5Dget_create_plist(dataset.get()));
  std::string layout = "contiguous";
  if (H5Pget_layout(create.get()) == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(static_cast<std::size_t>(std::max(0, H5Sget_simple_extent_ndims(space.get()))));
    H5Pget_chunk(create.get(), static_cast<int>(chunk.size()), chunk.data());
    layout = fmt::format("chunks [{}]", fmt::join(chunk, ", "));
    for (int f = 0; f < H5Pget_nfilters(create.get()); ++f) {
      char filter[64] = {};
      unsigned flags = 0;
      std::size_t count = 0;
      H5Pget_filter2(create.get(), static_cast<unsigned>(f), &flags, &count, nullptr, sizeof filter, filter, nullptr);
      layout += fmt::format(", {}", filter);
    }
  }
  std::cout << fmt::format("  {}: {} {}, {}\n", path, h5_type_name(type.get()), dims_text(space.get()), layout);
  return 0;
}

int run_inspect(std::span<const std::string> args) {
  std::vector<std::string> specs;
  std::string x_name = "x";
  std::string y_name = "y";
  po::options_description options("inspect options");
  // clang-format off
  options.add_options()
      ("help,h", "show this help")
      ("paths", po::value(&specs)->multitoken(),
       "files, directories, globs or .txt/.list files (also as plain arguments)")
      ("x-name", po::value(&x_name)->default_value(x_name), "name of the input dataset")
      ("y-name", po::value(&y_name)->default_value(y_name), "name of the label dataset");
  // clang-format on
  po::positional_options_description positional;
  positional.add("paths", -1);
  po::variables_map values;
  if (!parse_arguments(args, options, positional,
                       "usage: mnddp-data inspect PATHS... [options]\n"
                       "Describes each file and checks that together they form one dataset.",
                       values))
    return kExitOk;

  if (specs.empty()) throw UsageError("inspect: no paths given (usage: mnddp-data inspect PATHS...)");
  std::vector<std::string> files;
  for (const auto& spec : specs) {
    auto expanded = expand_data_paths(spec, "inspect");
    files.insert(files.end(), expanded.begin(), expanded.end());
  }
  for (const auto& file : files) {
    std::lock_guard lock(hdf5_mutex());
    H5Handle handle = h5_open_read_only(file);
    std::cout << file << "\n";
    hsize_t position = 0;
    std::string root;
    H5Literate(handle.get(), H5_INDEX_NAME, H5_ITER_INC, &position, describe_member, &root);
  }
  // Validates what the trainer needs: x/y present and consistent, every shard the same samples.
  const ShardIndex index = scan_shards(files, x_name, y_name);
  std::cout << fmt::format("OK: {} file{}, {} samples of {} [{}]\n", index.shards.size(),
                           index.shards.size() == 1 ? "" : "s", index.num_samples(),
                           sample_type_name(index.sample_type), fmt::join(index.sample_shape, ", "));
  return kExitOk;
}

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(std::span<const std::string> args);
};

constexpr Subcommand kSubcommands[] = {
    {"synth", "write a synthetic classification dataset (HDF5 shards)", run_synth},
    {"inspect", "describe HDF5 shards and check that they form one dataset", run_inspect},
};

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: mnddp-data <command> [options]\n\ncommands:\n");
  for (const auto& command : kSubcommands) std::fprintf(out, "  %-10s %s\n", command.name, command.summary);
  std::fprintf(out, "\nRun 'mnddp-data <command> --help' for a command's options.\n");
}

int run(const std::vector<std::string>& args) {
  if (args.empty()) {
    print_usage(stderr);
    return kExitUsage;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_usage(stdout);
    return kExitOk;
  }
  for (const auto& command : kSubcommands)
    if (args[0] == command.name) return command.run(std::span(args).subspan(1));
  std::vector<std::string> names;
  for (const auto& command : kSubcommands) names.emplace_back(command.name);
  throw UsageError(
      fmt::format("unknown command '{}' (commands: {}; see mnddp-data --help)", args[0], fmt::join(names, ", ")));
}

}  // namespace
}  // namespace mnddp

int main(int argc, char** argv) {
  mnddp::h5_silence_default_errors();
  try {
    return mnddp::run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const mnddp::Error& e) {
    std::fprintf(stderr, "mnddp-data: error: %s\n", e.what());
    return e.exit_code();
  } catch (const po::error& e) {
    std::fprintf(stderr, "mnddp-data: error: %s\n", e.what());
    return mnddp::kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mnddp-data: error: %s\n", e.what());
    return mnddp::kExitFailure;
  }
}
