// The columns of a record in the flat outputs: each column once, with its name in every format, its unit and
// how it reads a record. The CSV writes every column that has a CSV name, the Markdown and terminal tables
// those that have a table header, each in this table's order (writers.hpp prints them). A new field in the
// outputs is one entry in columns.cpp, plus the code that fills the record (pair_run.hpp's record_measured
// for a measured one).
//
// nvbench's printers are the model: each summary a named value with a hint for the printers, the printers
// blind to what the values are.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "harness/records/record.hpp"

namespace faprobe {

struct Column {
  // The CSV header, its unit in the name ("time_median_s", "peak_bytes"); nullptr: not in the CSV.
  const char* csv = nullptr;
  // What its numbers count: "s", "bytes", "FLOP", "FLOP/s", "B/s", "fraction", or "" (text, counts, flags).
  const char* unit = "";
  // The Markdown header and the terminal table's; nullptr: not in the tables.
  const char* markdown = nullptr;
  const char* terminal = nullptr;
  // The terminal column's width: negative left-aligned (text), positive right-aligned (numbers, also right
  // in Markdown), 0 the last, unpadded, after two spaces.
  int width = 0;
  // The CSV field (plain numbers, "" for none) and the tables' cell ("busy 7.998 ms", "-" for none).
  std::string (*csv_value)(const Record&) = nullptr;
  std::string (*table_value)(const Record&) = nullptr;
  // The Markdown cell when it is not table_value escaped for Markdown (markdown_cell); nullptr: that.
  std::string (*markdown_value)(const Record&) = nullptr;
};

// Every column, in output order.
const std::vector<Column>& record_columns();

// Half the interquartile range over the median, the "±" the tables show beside a median; none for a record
// without time or with one sample (whose quartiles are the median: no spread was seen, not a spread of 0).
std::optional<double> half_iqr_fraction(const Record& record);

// Whether a record's bandwidth is above the copy rate its percentage is of: marked "*" (kCacheLegend).
bool above_copy_bandwidth(const Record& record);

// A table cell's text for Markdown: valid UTF-8, on one line, with its '|' (and the '\\' that could escape
// one) escaped.
std::string markdown_cell(const std::string& text);

}  // namespace faprobe
