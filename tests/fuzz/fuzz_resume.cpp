// Fuzz target: the JSONL that --resume reads back (harness/records/writers.hpp: parse_resume_jsonl, a pure function
// over the file's bytes). Whatever the bytes, it returns records and a repair, or throws UsageError; and
// what it keeps must be whole: the good bytes a prefix of the input, every kept record a valid case that
// writes back to one line.
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_targets.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"
#include "model/errors.hpp"

namespace faprobe::fuzz {

int resume_jsonl(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const ResumeFile file = parse_resume_jsonl(bytes, "fuzz.jsonl");
    if (file.good_bytes > size) throw std::logic_error("resume keeps more bytes than the file has");
    if ((file.torn_line != 0) != !file.warning.empty()) throw std::logic_error("a torn line without its warning");
    for (const Record& record : file.records) {
      record.c.validate();
      const std::string line = nlohmann::json(record).dump();
      if (line.find('\n') != std::string::npos) throw std::logic_error("a record that writes more than one line");
    }
  } catch (const UsageError&) {
  }
  return 0;
}

}  // namespace faprobe::fuzz
