// Writers: JSONL streams and reads back exactly; the JSON document and CSV carry the same records.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "harness/writers.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

std::vector<Record> sample_records() {
  Record timed;
  timed.impl = "cpu.tiled";
  timed.device = "cpu";
  timed.c.seq_q = timed.c.seq_k = 4096;
  timed.c.mask = Mask::causal;
  timed.time = TimeStats{0.25, 0.26, 0.24, 0.3, 0.245, 0.27, 0.01, 12, {0.3, 0.24, 0.25, 0.251}};
  timed.bandwidth_fraction = 0.4375;
  timed.memory = {123456789, 4096, 120000000};
  timed.verify = VerifyResult{1.5e-7, 2e-6, 3e-6, 256, 4, true, false, 0, 0, "", {}};
  timed.details = {{"block_q", 64}, {"note", "a, \"quoted\" value"}};
  Record skipped;
  skipped.impl = "cpu.naive";
  skipped.device = "cpu";
  skipped.c.seq_q = skipped.c.seq_k = 65536;
  skipped.status = Status::skipped;
  skipped.reason = "needs 137.4 GB, limit 21.6 GB";
  skipped.memory.predicted_bytes = 137400000000ull;
  return {timed, skipped};
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("faprobe-test-" + std::to_string(::getpid()) + "-" + name)).string();
}

TEST(Writers, JsonlRoundTripIsExact) {
  const std::string path = temp_path("records.jsonl");
  std::filesystem::remove(path);
  {
    JsonlWriter writer(path);
    for (const Record& record : sample_records()) writer.write(record);
  }
  const std::vector<Record> back = read_jsonl(path);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(nlohmann::json(back[0]), nlohmann::json(sample_records()[0]));
  EXPECT_EQ(nlohmann::json(back[1]), nlohmann::json(sample_records()[1]));
  EXPECT_NEAR(*back[0].gflops(), back[0].c.flops() / 0.25 * 1e-9, 1e-9);
  EXPECT_FALSE(back[1].gflops().has_value());
  ASSERT_TRUE(back[0].bandwidth_fraction.has_value());
  EXPECT_EQ(*back[0].bandwidth_fraction, 0.4375);
  EXPECT_FALSE(back[1].bandwidth_fraction.has_value());
  EXPECT_EQ(back[0].time->samples_s, (std::vector<double>{0.3, 0.24, 0.25, 0.251}));  // the raw samples, in order

  // read_jsonl is strict: a line cut short by a kill is an error there (--resume repairs it, through
  // parse_resume_jsonl: test_output_files.cpp), and so is a corrupt record in the middle.
  std::ofstream(path, std::ios::app) << "{\"impl\": \"cut short";
  EXPECT_THROW(read_jsonl(path), UsageError);
  std::ofstream(path, std::ios::app) << "\n{\"impl\": 3}\n";
  EXPECT_THROW(read_jsonl(path), UsageError);
  std::filesystem::remove(path);
}

TEST(Writers, JsonDocumentHasTheSchemaAndMetadata) {
  const std::string path = temp_path("records.json");
  write_json(path, {{"version", "x"}, {"host", {{"cores", 2}}}}, sample_records());
  std::ifstream file(path);
  const nlohmann::json document = nlohmann::json::parse(file);
  EXPECT_EQ(document["schema"], "faprobe/1");
  EXPECT_EQ(document["host"]["cores"], 2);
  ASSERT_EQ(document["records"].size(), 2u);
  for (const char* field : {"impl", "device", "case", "status", "reason", "time_s", "flops", "bytes", "tflops",
                            "gbytes_per_s", "bandwidth_fraction", "memory", "verify", "details"}) {
    EXPECT_TRUE(document["records"][0].contains(field)) << field;
  }
  EXPECT_EQ(document["records"][0]["bandwidth_fraction"], 0.4375);
  EXPECT_EQ(document["records"][1]["time_s"], nullptr);
  EXPECT_EQ(document["records"][1]["bandwidth_fraction"], nullptr);
  std::filesystem::remove(path);
}

// Splits one CSV line with RFC 4180 quoting.
std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted && ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (ch == '"') {
      quoted = !quoted;
    } else if (ch == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += ch;
    }
  }
  return fields;
}

TEST(Writers, CsvCarriesTheSameValuesWithUnitsInHeaders) {
  const std::string path = temp_path("records.csv");
  write_csv(path, sample_records());
  std::ifstream file(path);
  std::string header_line, first, second;
  std::getline(file, header_line);
  std::getline(file, first);
  std::getline(file, second);
  const auto header = split_csv(header_line);
  const auto row = split_csv(first);
  ASSERT_EQ(header, csv_header());
  ASSERT_EQ(row.size(), header.size());
  auto column = [&](const std::vector<std::string>& fields, const std::string& name) {
    return fields[std::size_t(std::find(header.begin(), header.end(), name) - header.begin())];
  };
  EXPECT_EQ(column(row, "impl"), "cpu.tiled");
  EXPECT_DOUBLE_EQ(std::stod(column(row, "time_median_s")), 0.25);
  EXPECT_EQ(column(row, "peak_bytes"), "123456789");
  EXPECT_DOUBLE_EQ(std::stod(column(row, "bandwidth_fraction")), 0.4375);
  EXPECT_EQ(column(split_csv(second), "bandwidth_fraction"), "");
  EXPECT_EQ(column(row, "passed"), "true");
  EXPECT_EQ(nlohmann::json::parse(column(row, "details_json"))["note"], "a, \"quoted\" value");
  EXPECT_EQ(column(split_csv(second), "reason"), "needs 137.4 GB, limit 21.6 GB");
  EXPECT_EQ(column(split_csv(second), "time_median_s"), "");
  std::filesystem::remove(path);
}

TEST(Writers, MarkdownAndTableShowEveryRecord) {
  std::ostringstream table;
  TableWriter writer(table);
  for (const Record& record : sample_records()) writer.write(record);
  EXPECT_NE(table.str().find("250.000 ms"), std::string::npos);
  EXPECT_NE(table.str().find(" 43.8 "), std::string::npos) << table.str();  // bandwidth_fraction in percent
  EXPECT_NE(table.str().find("needs 137.4 GB"), std::string::npos);
  const std::string path = temp_path("records.md");
  write_markdown(path, sample_records());
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_NE(text.str().find("| cpu.naive | b1 h8 s65536 d64 fp32 | skipped |"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("| 43.8 |"), std::string::npos) << text.str();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace faprobe
