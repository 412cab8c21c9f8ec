// Writers: JSONL streams and reads back exactly; the JSON document and CSV carry the same records; the flat
// formats print the one column table (columns.hpp), which is itself checked for what a new column could get
// wrong.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "harness/records/columns.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"
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

// A contended record (contention.hpp) is marked in every format: "busy" before its median in the table, with
// the legend and its evidence under the first one only; a footnote under the Markdown table; CSV columns.
TEST(Writers, ContendedRecordsAreMarkedBusy) {
  std::vector<Record> records = sample_records();
  Contention contention;
  contention.evidence = {"2.0 involuntary context switches per sample (250 per second)",
                         "13 of 13 samples within 20 us of a multiple of 1 ms (a scheduler tick)"};
  contention.quantised = true;
  records[0].time->contended = contention;
  records.push_back(records[0]);
  records.back().c.seq_q = records.back().c.seq_k = 8192;

  std::ostringstream table;
  TableWriter writer(table);
  for (const Record& record : records) writer.write(record);
  const std::string text = table.str();
  EXPECT_NE(text.find("busy 250.000 ms"), std::string::npos) << text;
  std::size_t legends = 0;
  for (std::size_t at = text.find(kBusyLegend); at != std::string::npos; at = text.find(kBusyLegend, at + 1)) ++legends;
  EXPECT_EQ(legends, 1u) << text;
  EXPECT_NE(text.find("    busy: 13 of 13 samples within 20 us"), std::string::npos) << text;

  std::ostringstream quiet_table;
  TableWriter quiet_writer(quiet_table);
  for (const Record& record : sample_records()) quiet_writer.write(record);
  EXPECT_EQ(quiet_table.str().find("busy"), std::string::npos) << quiet_table.str();
  EXPECT_EQ(markdown_document(sample_records()).find("busy"), std::string::npos);

  const std::string markdown = markdown_document(records);
  EXPECT_NE(markdown.find("| busy 250.000 ms |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find(std::string("\n") + kBusyLegend + "\n"), std::string::npos) << markdown;

  const std::vector<std::string> header = csv_header();
  auto column = [&](const std::vector<std::string>& row, const std::string& name) {
    const auto at = std::find(header.begin(), header.end(), name);
    EXPECT_NE(at, header.end()) << name;
    return at == header.end() ? std::string() : row[std::size_t(at - header.begin())];
  };
  const std::vector<std::string> busy = csv_row(records[0]), quiet = csv_row(sample_records()[0]),
                                  untimed = csv_row(sample_records()[1]);
  EXPECT_EQ(column(busy, "contended"), "true");
  EXPECT_EQ(column(busy, "contention_evidence"), contention.evidence[0] + "; " + contention.evidence[1]);
  EXPECT_EQ(column(quiet, "contended"), "false");
  EXPECT_EQ(column(quiet, "contention_evidence"), "");
  EXPECT_EQ(column(untimed, "contended"), "");  // not timed: neither
}

// The median never stands alone: the table, the Markdown and the CSV give its spread (half the interquartile
// range over the median, "±") and its sample count; a single sample has a count and no spread.
TEST(Writers, MediansCarryTheirSpreadAndSampleCount) {
  std::vector<Record> records = sample_records();  // 12 samples, q1 0.245 s, q3 0.27 s, median 0.25 s: ± 5.0 %
  records.push_back(records[0]);
  records.back().c.seq_q = records.back().c.seq_k = 8192;
  records.back().time = TimeStats{7.64, 7.64, 7.64, 7.64, 7.64, 7.64, 0, 1, {7.64}};

  std::ostringstream table;
  TableWriter writer(table);
  for (const Record& record : records) writer.write(record);
  std::istringstream lines(table.str());
  std::string header, timed, skipped, single;
  std::getline(lines, header);
  std::getline(lines, timed);
  std::getline(lines, skipped);
  std::getline(lines, single);
  EXPECT_NE(header.find("median       ±       n   GFLOP/s"), std::string::npos) << header;
  EXPECT_NE(timed.find("250.000 ms   5.0 %      12 "), std::string::npos) << timed;
  EXPECT_NE(skipped.find("  -       -       - "), std::string::npos) << skipped;
  EXPECT_NE(single.find("7.640 s       -       1 "), std::string::npos) << single;

  const std::string markdown = markdown_document(records);
  EXPECT_NE(markdown.find("| median time | ± (half IQR) | samples | GFLOP/s |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| 250.000 ms | 5.0 % | 12 |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| skipped | - | - | - |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| 7.640 s | - | 1 |"), std::string::npos) << markdown;

  const std::vector<std::string> names = csv_header();
  auto column = [&](const std::vector<std::string>& row, const std::string& name) {
    const auto at = std::find(names.begin(), names.end(), name);
    EXPECT_NE(at, names.end()) << name;
    return at == names.end() ? std::string() : row[std::size_t(at - names.begin())];
  };
  const std::vector<std::string> many = csv_row(records[0]), none = csv_row(records[1]), one = csv_row(records[2]);
  EXPECT_EQ(column(many, "samples"), "12");
  EXPECT_DOUBLE_EQ(std::stod(column(many, "time_q1_s")), 0.245);
  EXPECT_DOUBLE_EQ(std::stod(column(many, "time_q3_s")), 0.27);
  EXPECT_DOUBLE_EQ(std::stod(column(many, "time_half_iqr_fraction")), 0.05);
  EXPECT_EQ(column(none, "samples"), "");
  EXPECT_EQ(column(none, "time_half_iqr_fraction"), "");
  EXPECT_EQ(column(one, "samples"), "1");
  EXPECT_EQ(column(one, "time_half_iqr_fraction"), "");  // one sample: no spread seen, not a spread of 0
}

// A bandwidth fraction above 1 is data served from cache, not a kernel beating DRAM: its percentage is marked
// and the legend says so, once in the table and under the Markdown; at or below 100 % nothing is marked.
TEST(Writers, BandwidthAboveTheCopyRateIsMarkedCacheResident) {
  std::vector<Record> records = sample_records();  // 43.75 %
  records.push_back(records[0]);
  records.back().c.mode = Mode::decode;
  records.back().c.seq_q = 1;
  records.back().bandwidth_fraction = 4.694;
  records.push_back(records.back());
  records.back().c.seq_k = 8192;
  records.back().bandwidth_fraction = 1.0;  // exactly the copy rate: not above it

  std::ostringstream table;
  TableWriter writer(table);
  for (const Record& record : records) writer.write(record);
  const std::string text = table.str();
  EXPECT_NE(text.find(" 469.4* "), std::string::npos) << text;
  EXPECT_NE(text.find(" 100.0 "), std::string::npos) << text;
  EXPECT_NE(text.find(" 43.8 "), std::string::npos) << text;
  std::size_t legends = 0;
  for (std::size_t at = text.find(kCacheLegend); at != std::string::npos; at = text.find(kCacheLegend, at + 1)) {
    ++legends;
  }
  EXPECT_EQ(legends, 1u) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '*'), 2) << text;  // the mark and its legend's

  const std::string markdown = markdown_document(records);
  EXPECT_NE(markdown.find("| 469.4\\* |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| 100.0 |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find(std::string("\n\\") + kCacheLegend + "\n"), std::string::npos) << markdown;

  std::ostringstream quiet_table;
  TableWriter quiet_writer(quiet_table);
  for (const Record& record : sample_records()) quiet_writer.write(record);
  EXPECT_EQ(quiet_table.str().find('*'), std::string::npos) << quiet_table.str();
  EXPECT_EQ(markdown_document(sample_records()).find('*'), std::string::npos);
}

// What a column of columns.hpp could get wrong, each a line naming the column: a CSV name twice, a unit the
// name does not end in (the CSV's units are in its headers), a format without its getter, a table column
// with one header but not the other, a column in no format.
std::vector<std::string> column_problems(const std::vector<Column>& columns) {
  const std::vector<std::pair<std::string, std::string>> unit_suffixes = {
      {"s", "_s"}, {"bytes", "bytes"}, {"fraction", "_fraction"}, {"FLOP/s", "_per_s"}, {"B/s", "_per_s"},
      {"FLOP", "flops"}};
  std::vector<std::string> problems;
  std::vector<std::string> names;
  for (const Column& column : columns) {
    const std::string name = column.csv ? column.csv : column.markdown ? column.markdown : "(unnamed)";
    if (column.csv) {
      if (std::find(names.begin(), names.end(), name) != names.end()) problems.push_back(name + ": named twice");
      names.push_back(name);
      if (!column.csv_value) problems.push_back(name + ": in the CSV without csv_value");
      for (const auto& [unit, suffix] : unit_suffixes) {
        const bool ends = name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
        if (column.unit == unit && !ends) problems.push_back(name + ": unit " + unit + " but the name does not end in " + suffix);
      }
    }
    if ((column.markdown == nullptr) != (column.terminal == nullptr)) {
      problems.push_back(name + ": a header for one table but not the other");
    }
    if (column.markdown && !column.table_value) problems.push_back(name + ": in the tables without table_value");
    if (!column.csv && !column.markdown) problems.push_back(name + ": in no format");
  }
  return problems;
}

TEST(Columns, EveryColumnIsNamedOnceWithItsUnitAndItsGetters) {
  EXPECT_EQ(column_problems(record_columns()), std::vector<std::string>{});
  // The check itself, on planted tables: each defect is named.
  auto planted = [](auto change) {
    std::vector<Column> columns = record_columns();
    change(columns);
    return column_problems(columns);
  };
  auto find = [](const std::vector<Column>& columns, const std::string& csv) {
    return std::find_if(columns.begin(), columns.end(),
                        [&](const Column& c) { return c.csv && csv == c.csv; }) - columns.begin();
  };
  EXPECT_EQ(planted([&](std::vector<Column>& c) { c.push_back(c[std::size_t(find(c, "seq_k"))]); }),
            std::vector<std::string>{"seq_k: named twice"});
  EXPECT_EQ(planted([&](std::vector<Column>& c) { c[std::size_t(find(c, "peak_bytes"))].unit = "s"; }),
            std::vector<std::string>{"peak_bytes: unit s but the name does not end in _s"});
  EXPECT_EQ(planted([&](std::vector<Column>& c) { c[std::size_t(find(c, "samples"))].table_value = nullptr; }),
            std::vector<std::string>{"samples: in the tables without table_value"});
  EXPECT_EQ(planted([&](std::vector<Column>& c) { c[std::size_t(find(c, "reason"))].csv_value = nullptr; }),
            std::vector<std::string>{"reason: in the CSV without csv_value"});
  EXPECT_EQ(planted([&](std::vector<Column>& c) { c[std::size_t(find(c, "status"))].terminal = nullptr; }),
            std::vector<std::string>{"status: a header for one table but not the other"});
}

// The flat formats are printers over the table: the CSV's header is its CSV names, the Markdown's header its
// Markdown headers and every row as many cells, the terminal's header its terminal headers, in order.
TEST(Columns, TheFlatFormatsPrintTheTableInItsOrder) {
  std::vector<std::string> csv, markdown, terminal;
  for (const Column& column : record_columns()) {
    if (column.csv) csv.push_back(column.csv);
    if (column.markdown) markdown.push_back(column.markdown);
    if (column.terminal) terminal.push_back(column.terminal);
  }
  EXPECT_EQ(csv_header(), csv);
  for (const Record& record : sample_records()) EXPECT_EQ(csv_row(record).size(), csv.size());

  std::istringstream lines(markdown_document(sample_records()));
  std::string header, rule, row;
  std::getline(lines, header);
  std::getline(lines, rule);
  std::string expected_header = "|";
  for (const std::string& name : markdown) expected_header += " " + name + " |";
  EXPECT_EQ(header, expected_header);
  EXPECT_EQ(std::count(rule.begin(), rule.end(), '|'), std::ptrdiff_t(markdown.size() + 1)) << rule;
  while (std::getline(lines, row) && !row.empty()) {
    // An escaped '|' ("\|") is part of a cell.
    std::size_t bars = 0;
    for (std::size_t i = 0; i < row.size(); ++i) bars += row[i] == '|' && (i == 0 || row[i - 1] != '\\');
    EXPECT_EQ(bars, markdown.size() + 1) << row;
  }

  std::ostringstream table;
  TableWriter(table).write(sample_records()[0]);
  std::istringstream words(table.str().substr(0, table.str().find('\n')));
  std::vector<std::string> shown;
  for (std::string word; words >> word;) shown.push_back(word);
  std::vector<std::string> expected;  // "peak mem" is two words on the line
  for (const std::string& name : terminal) {
    std::istringstream parts(name);
    for (std::string part; parts >> part;) expected.push_back(part);
  }
  EXPECT_EQ(shown, expected);
}

}  // namespace
}  // namespace faprobe
