// Reads the files that make_h5py_files.py wrote with h5py (every dtype and layout, and the bad
// ones) through scan_shards, H5Reader and Loader, and compares with the values numpy computed.
// Run by h5py_files.sh with MNDDP_INTEROP_DIR set; not a test on its own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numeric>

#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {
namespace {

nlohmann::json manifest() {
  const char* dir = std::getenv("MNDDP_INTEROP_DIR");
  if (dir == nullptr) throw std::runtime_error("MNDDP_INTEROP_DIR is not set (run tests/interop/h5py_files.sh)");
  std::ifstream in(std::string(dir) + "/manifest.json");
  if (!in) throw std::runtime_error(std::string("no manifest.json in ") + dir);
  return nlohmann::json::parse(in);
}

std::vector<unsigned char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A scrambled order that crosses shards and repeats nothing: i -> (i * 7 + 3) mod n for n not a
// multiple of 7 (30 samples per case).
std::vector<std::int64_t> scrambled(std::int64_t n) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = (i * 7 + 3) % n;
  return order;
}

TEST(H5pyFiles, EveryDtypeAndLayoutReadsBackExactly) {
  h5_silence_default_errors();
  const auto doc = manifest();
  ASSERT_GE(doc.at("cases").size(), 60u);
  for (const auto& c : doc.at("cases")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const ShardIndex index = scan_shards(c.at("files").get<std::vector<std::string>>(), "x", "y");
    EXPECT_EQ(sample_type_name(index.sample_type), c.at("dtype").get<std::string>());
    EXPECT_EQ(index.sample_shape, c.at("sample_shape").get<std::vector<std::int64_t>>());
    const std::int64_t n = c.at("num_samples");
    ASSERT_EQ(index.num_samples(), n);
    for (std::size_t s = 0; s < index.shards.size(); ++s) {
      EXPECT_EQ(index.shards[s].label_min, c.at("label_ranges")[s][0].get<std::int64_t>());
      EXPECT_EQ(index.shards[s].label_max, c.at("label_ranges")[s][1].get<std::int64_t>());
    }

    const std::string stem = c.at("stem");
    const auto expected_x = file_bytes(stem + ".x_f32");
    const auto expected_raw = file_bytes(stem + ".x_raw");
    const auto expected_y = file_bytes(stem + ".y_i64");
    const auto numel = static_cast<std::size_t>(index.sample_numel());
    const std::size_t raw_row = numel * sample_type_size(index.sample_type);
    ASSERT_EQ(expected_x.size(), static_cast<std::size_t>(n) * numel * sizeof(float));
    ASSERT_EQ(expected_raw.size(), static_cast<std::size_t>(n) * raw_row);

    H5Reader reader(index);
    const auto order = scrambled(n);
    std::vector<float> x(order.size() * numel);
    std::vector<std::int64_t> y(order.size());
    reader.read(order, x.data(), y.data());
    std::vector<unsigned char> raw(order.size() * raw_row);
    std::vector<std::int64_t> raw_y(order.size());
    reader.read_stored(order, raw.data(), raw_y.data());
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto sample = static_cast<std::size_t>(order[i]);
      // Bit-exact (memcmp): -0.0, subnormals and float16 extremes must survive too.
      EXPECT_EQ(
          std::memcmp(x.data() + i * numel, expected_x.data() + sample * numel * sizeof(float), numel * sizeof(float)),
          0)
          << "float values of sample " << sample;
      EXPECT_EQ(std::memcmp(raw.data() + i * raw_row, expected_raw.data() + sample * raw_row, raw_row), 0)
          << "stored values of sample " << sample;
      std::int64_t label = 0;
      std::memcpy(&label, expected_y.data() + sample * sizeof label, sizeof label);
      EXPECT_EQ(y[i], label) << "label of sample " << sample;
      EXPECT_EQ(raw_y[i], label) << "stored label of sample " << sample;
    }
  }
}

TEST(H5pyFiles, Uint8InputsReachTheTrainerScaledToTheUnitInterval) {
  const auto doc = manifest();
  for (const auto& c : doc.at("cases")) {
    if (c.at("dtype") != "uint8") continue;
    H5Reader reader(scan_shards(c.at("files").get<std::vector<std::string>>(), "x", "y"));
    const auto raw = file_bytes(c.at("stem").get<std::string>() + ".x_raw");
    std::vector<std::int64_t> order(static_cast<std::size_t>(reader.index().num_samples()));
    std::iota(order.begin(), order.end(), 0);
    Loader loader(reader, order, 8, 2);
    std::size_t offset = 0;
    while (auto batch = loader.next())
      for (const float value : batch->x) ASSERT_EQ(value, static_cast<float>(raw[offset++]) / 255.0f);
    EXPECT_EQ(offset, raw.size());
  }
}

TEST(H5pyFiles, BadFilesAreUsageErrorsNamingTheFile) {
  const auto doc = manifest();
  for (const auto& bad : doc.at("bad")) {
    const std::string file = bad.at("file");
    const std::string stage = bad.at("stage");
    SCOPED_TRACE(file);
    try {
      const ShardIndex index = scan_shards({file}, bad.at("x_name"), bad.at("y_name"));
      if (stage == "labels") check_label_range(index, bad.at("num_classes").get<int>(), "--num-classes");
      if (stage == "read") {
        std::vector<std::int64_t> all(static_cast<std::size_t>(index.num_samples()));
        std::iota(all.begin(), all.end(), 0);
        std::vector<float> x(all.size() * static_cast<std::size_t>(index.sample_numel()));
        H5Reader(index, H5ReaderOptions{NonfinitePolicy::Warn}).read(all, x.data(), nullptr);  // passes
        H5Reader(index).read(all, x.data(), nullptr);
      }
      ADD_FAILURE() << "accepted";
    } catch (const UsageError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(file), std::string::npos) << message;
      EXPECT_NE(message.find(bad.at("expect").get<std::string>()), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
    }
  }
}

}  // namespace
}  // namespace mnddp
