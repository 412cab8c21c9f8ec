// Output files (src/harness/io/output_files.hpp) and the JSONL read back for --resume (parse_resume_jsonl):
// paths checked without side effects, documents replaced whole (symbolic links written through, permission
// bits kept, nothing left behind by a failed write), --out locked, and a resumed file's torn last line,
// missing newline and hostile records, including every prefix of a valid file and random corruptions.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness/io/output_files.hpp"
#include "harness/io/progress.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"
#include "model/errors.hpp"
#include "temp_dir_support.hpp"

namespace faprobe {
namespace {

namespace fs = std::filesystem;

class OutputFiles : public test_support::TempDirTest {
 protected:
  void write(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }
  std::string read(const std::string& name) const {
    std::ifstream file(path(name));
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }
  // The names in the directory, to see that nothing (a temporary file) was left behind.
  std::vector<std::string> names() const {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(directory_)) found.push_back(entry.path().filename().string());
    std::sort(found.begin(), found.end());
    return found;
  }

};

Record sample_record(std::int64_t seq) {
  Record record;
  record.impl = "cpu.tiled";
  record.device = "cpu";
  record.c.seq_q = record.c.seq_k = seq;
  record.c.heads = record.c.kv_heads = 2;
  record.c.head_dim = 16;
  record.time = TimeStats{0.25, 0.26, 0.24, 0.3, 0.245, 0.27, 0.01, 12, {}};
  record.memory = {123456789, 4096, 120000000};
  record.verify = VerifyResult{1.5e-7, 2e-6, 3e-6, 256, 4, true, false, 0, 0, "", {}};
  record.details = {{"block_q", 64}, {"threads", 2}};
  return record;
}

std::string line_of(const Record& record) { return nlohmann::json(record).dump() + "\n"; }

// Three records, one per line, as --out holds them.
std::string three_records() { return line_of(sample_record(17)) + line_of(sample_record(64)) + line_of(sample_record(300)); }

// A UsageError's message, or "" when `parse` did not throw one (any other exception fails the test).
template <typename Function>
std::string usage_error(Function parse) {
  try {
    parse();
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

// --- parse_resume_jsonl ---

TEST(ResumeFile, ATornLastLineIsDroppedWithAWarningNamingTheFileAndLine) {
  const std::string good = line_of(sample_record(17)) + line_of(sample_record(64));
  const std::string torn = line_of(sample_record(300)).substr(0, 150);
  const ResumeFile file = parse_resume_jsonl(good + torn, "r.jsonl");
  ASSERT_EQ(file.records.size(), 2u);
  EXPECT_EQ(file.good_bytes, good.size());
  EXPECT_FALSE(file.missing_newline);
  EXPECT_EQ(file.torn_line, 3);
  EXPECT_NE(file.warning.find("r.jsonl:3: dropped a torn last line"), std::string::npos) << file.warning;
  EXPECT_EQ(file.warning.find('\n'), std::string::npos);
}

TEST(ResumeFile, ATornLineThatEndsInABraceIsTornToo) {
  // Cut just after the case object: the old reader took a line ending in '}' for a whole record and
  // failed the file.
  const std::string good = line_of(sample_record(17));
  const std::string last = line_of(sample_record(64));
  const std::string torn = last.substr(0, last.find('}') + 1);
  ASSERT_EQ(torn.back(), '}');
  const ResumeFile file = parse_resume_jsonl(good + torn, "r.jsonl");
  EXPECT_EQ(file.records.size(), 1u);
  EXPECT_EQ(file.good_bytes, good.size());
  EXPECT_EQ(file.torn_line, 2);
}

TEST(ResumeFile, ALastRecordWithoutItsNewlineIsKeptAndAskedForOne) {
  std::string bytes = three_records();
  bytes.pop_back();
  const ResumeFile file = parse_resume_jsonl(bytes, "r.jsonl");
  ASSERT_EQ(file.records.size(), 3u);
  EXPECT_EQ(nlohmann::json(file.records[2]), nlohmann::json(sample_record(300)));
  EXPECT_EQ(file.good_bytes, bytes.size());
  EXPECT_TRUE(file.missing_newline);
  EXPECT_EQ(file.torn_line, 0);
  EXPECT_TRUE(file.warning.empty());
  EXPECT_FALSE(parse_resume_jsonl(three_records(), "r.jsonl").missing_newline);
}

TEST(ResumeFile, BlankLinesAndAnEmptyFileHoldNoRecords) {
  EXPECT_TRUE(parse_resume_jsonl("", "r.jsonl").records.empty());
  const ResumeFile file = parse_resume_jsonl("\n  \n" + line_of(sample_record(17)) + "\r\n\t", "r.jsonl");
  EXPECT_EQ(file.records.size(), 1u);
  EXPECT_TRUE(file.missing_newline);  // "\t" without a newline: new records start on a line of their own
  EXPECT_EQ(file.torn_line, 0);
}

TEST(ResumeFile, ABadLineThatIsNotTheLastIsAnErrorNamingFileAndLine) {
  const std::string first = line_of(sample_record(17));
  const std::string second = line_of(sample_record(64));
  // A torn line with records after it (what the old reader produced by appending to a torn line).
  const std::string glued = first + second.substr(0, 120) + second + line_of(sample_record(300));
  EXPECT_NE(usage_error([&] { parse_resume_jsonl(glued, "r.jsonl"); }).find("r.jsonl:2: not a faprobe record"),
            std::string::npos);
  // Two records on one line.
  const std::string two_on_one = first + second.substr(0, second.size() - 1) + second;
  EXPECT_NE(usage_error([&] { parse_resume_jsonl(two_on_one, "r.jsonl"); }).find("r.jsonl:2:"), std::string::npos);
  // A last line that is whole (it has its newline) but not JSON was not cut short: it is corrupt.
  EXPECT_NE(usage_error([&] { parse_resume_jsonl(first + "{\"impl\": \n", "r.jsonl"); }).find("r.jsonl:2:"),
            std::string::npos);
  // A last line without its newline that never began as a record: not a torn write, not ours to cut.
  EXPECT_NE(usage_error([&] { parse_resume_jsonl(first + "some notes", "r.jsonl"); }).find("r.jsonl:2: not a faprobe"),
            std::string::npos);
  // A complete JSON value that is not a record, even without a newline.
  EXPECT_NE(usage_error([&] { parse_resume_jsonl(first + "[1, 2]", "r.jsonl"); }).find("r.jsonl:2:"),
            std::string::npos);
}

TEST(ResumeFile, EveryPrefixOfAValidFileResumesItsCompleteRecords) {
  // Wherever a write stops, the file is repairable: the complete records are kept and the rest dropped.
  const std::string bytes = three_records();
  std::vector<std::size_t> line_ends;
  for (std::size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] == '\n') line_ends.push_back(i + 1);
  for (std::size_t cut = 0; cut <= bytes.size(); ++cut) {
    const std::string prefix = bytes.substr(0, cut);
    ResumeFile file;
    ASSERT_NO_THROW(file = parse_resume_jsonl(prefix, "r.jsonl")) << "cut at " << cut;
    std::size_t whole = 0;
    while (whole < line_ends.size() && line_ends[whole] <= cut) ++whole;
    const bool only_newline_missing = whole < line_ends.size() && cut + 1 == line_ends[whole];
    EXPECT_EQ(file.records.size(), whole + (only_newline_missing ? 1 : 0)) << "cut at " << cut;
    const std::uint64_t kept = whole == 0 ? 0 : line_ends[whole - 1];
    EXPECT_EQ(file.good_bytes, only_newline_missing || cut == kept ? cut : kept) << "cut at " << cut;
    EXPECT_EQ(file.missing_newline, only_newline_missing) << "cut at " << cut;
    EXPECT_EQ(file.torn_line != 0, cut != kept && !only_newline_missing) << "cut at " << cut;
  }
}

TEST(ResumeFile, HostileRecordsAreUsageErrorsNamingTheLine) {
  const nlohmann::json good = nlohmann::json(sample_record(17));
  auto with = [&](const std::string& pointer, const nlohmann::json& value) {
    nlohmann::json record = good;
    record[nlohmann::json::json_pointer(pointer)] = value;
    return record.dump() + "\n";
  };
  const std::pair<std::string, std::string> cases[] = {
      {with("/case/batch", 0), "--batch must be at least 1"},
      {with("/case/heads", -4), "--heads must be at least 1"},
      {with("/case/batch", 1e300), "case.batch: not an integer (1e+300)"},
      {with("/case/seq_k", -1e300), "case.seq_k: not an integer"},
      {with("/case/batch", std::uint64_t(18446744073709551615ull)), "case.batch: 18446744073709551615 is out of range"},
      {with("/case/head_dim", "64"), "case.head_dim: not an integer (string)"},
      {with("/case/seq_q", std::int64_t(1) << 62), "too large to index"},  // products past 2^63 in int64
      {with("/case/seed", -1), "case.seed: -1 is negative"},
      {with("/case/page_size", 1.5), "case.page_size: not an integer"},
      {with("/memory/peak_bytes", -1), "memory.peak_bytes: -1 is negative"},
      {with("/time_s/samples", 1e30), "time_s.samples: not an integer"},
      {with("/verify/rows_checked", 1e300), "verify.rows_checked: not an integer"},
      {with("/status", "great"), "unknown status 'great'"},
      {with("/case/dtype", "fp64"), "case.dtype"},
      {with("/case", nlohmann::json::array()), "not a faprobe record"},
      {"[1, 2, 3]\n", "not a faprobe record"},
      {"\"a string\"\n", "not a faprobe record"},
      {std::string(100000, '[') + std::string(100000, ']') + "\n", "nested deeper than 64 levels"},
      {std::string("{\"impl\": \"\xff\xfe\"}\n"), "not a faprobe record"},  // not UTF-8
      {std::string("{\"impl\"\0: 1}\n", 13), "not a faprobe record"},
  };
  for (const auto& [bad_line, fragment] : cases) {
    const std::string& line = bad_line;  // a lambda cannot capture a structured binding in C++17
    const std::string message = usage_error([&] { parse_resume_jsonl(line_of(sample_record(64)) + line, "r.jsonl"); });
    EXPECT_NE(message.find("r.jsonl:2: "), std::string::npos) << line.substr(0, 200) << "\n" << message;
    EXPECT_NE(message.find(fragment), std::string::npos) << line.substr(0, 200) << "\n" << message;
    EXPECT_LT(message.size(), 400u) << message;  // one short line, whatever the input held
  }
  // Variable lengths whose sum overflows int64 (each fits): refused before anything adds them.
  nlohmann::json varlen = good;
  varlen["case"]["mode"] = "decode";
  varlen["case"]["seq_q"] = 1;
  varlen["case"]["batch"] = 4;
  varlen["case"]["seq_k"] = std::int64_t(1) << 62;
  varlen["case"]["seqlens"] = {std::int64_t(1) << 62, std::int64_t(1) << 62, std::int64_t(1) << 62, 1};
  EXPECT_NE(usage_error([&] { parse_resume_jsonl(varlen.dump() + "\n", "r.jsonl"); }).find("r.jsonl:1: not a valid case"),
            std::string::npos);
}

// A line far longer than any record (a hostile or mistaken file) is refused before it is parsed, naming the
// file and the line, torn last line or not; one of exactly the limit is parsed as any line is.
TEST(ResumeFile, ALineLongerThanTheLimitIsRefusedBeforeItIsParsed) {
  const std::string huge = "{\"impl\": \"" + std::string(kMaxRecordLineBytes, 'x') + "\"}";
  for (const std::string& ending : {std::string("\n"), std::string()}) {
    const std::string message =
        usage_error([&] { parse_resume_jsonl(line_of(sample_record(64)) + huge + ending, "r.jsonl"); });
    EXPECT_NE(message.find("r.jsonl:2: a line of 1048588 bytes, more than the 1 MiB"), std::string::npos) << message;
  }
  std::string at_limit = line_of(sample_record(64));
  at_limit.insert(at_limit.size() - 2, std::string(kMaxRecordLineBytes + 1 - at_limit.size(), ' '));  // '}' and '\n' last
  ASSERT_EQ(at_limit.size(), kMaxRecordLineBytes + 1);
  EXPECT_EQ(parse_resume_jsonl(at_limit, "r.jsonl").records.size(), 1u);
}

TEST(ResumeFile, RandomCorruptionsAreRecordsOrUsageErrorsNeverAnythingElse) {
  // A small fuzz run (the libFuzzer harness goes further): random bytes overwritten, inserted or cut.
  const std::string valid = three_records();
  std::mt19937_64 random(12345);
  const std::string alphabet = "{}[]\":,0123456789-+.eE \n\\ntruefalsnul\xff\x80";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = valid;
    const int edits = 1 + int(random() % 8);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = random() % (bytes.size() + 1);
      switch (random() % 3) {
        case 0: if (at < bytes.size()) bytes[at] = alphabet[random() % alphabet.size()]; break;
        case 1: bytes.insert(at, 1, alphabet[random() % alphabet.size()]); break;
        case 2: bytes.resize(at); break;
      }
    }
    try {
      const ResumeFile file = parse_resume_jsonl(bytes, "r.jsonl");
      EXPECT_LE(file.good_bytes, bytes.size());
      for (const Record& record : file.records) EXPECT_NO_THROW(record.c.validate());
    } catch (const UsageError&) {
    } catch (const std::exception& error) {
      ADD_FAILURE() << "trial " << trial << ": " << error.what() << "\n" << bytes;
    }
  }
}

TEST_F(OutputFiles, ReadJsonlIsStrictAboutATornLine) {
  write("r.jsonl", three_records() + "{\"impl\": \"cut sh");
  EXPECT_NE(usage_error([&] { read_jsonl(path("r.jsonl")); }).find("r.jsonl:4: torn last line"), std::string::npos);
  write("r.jsonl", three_records());
  EXPECT_EQ(read_jsonl(path("r.jsonl")).size(), 3u);
}

// --- Checking paths ---

TEST_F(OutputFiles, NonRegularTargetsAreRefusedNamingFlagPathAndKind) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  fs::create_directories(path("dir"));
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path("sock").size(), sizeof(address.sun_path));
  std::strcpy(address.sun_path, path("sock").c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  fs::create_symlink(path("fifo"), path("to-fifo"));
  for (const OutputUse use : {OutputUse::document, OutputUse::log}) {
    for (const auto& [name, kind] : {std::pair{"fifo", "a FIFO"}, {"dir", "a directory"}, {"sock", "a socket"},
                                     {"to-fifo", "a FIFO"}}) {
      const std::string message = usage_error([&, name = name] { check_output("--md", path(name), use); });
      EXPECT_EQ(message.rfind("--md " + path(name) + ": is " + kind, 0), 0u) << message;
    }
  }
  ::close(sock);
  EXPECT_TRUE(fs::is_fifo(path("fifo")));
  EXPECT_TRUE(fs::is_directory(path("dir")));
}

TEST_F(OutputFiles, MissingDirectoriesAndDanglingLinksIntoThemAreRefused) {
  EXPECT_NE(usage_error([&] { check_output("--csv", path("no/r.csv"), OutputUse::document); })
                .find("the directory " + path("no") + " does not exist"),
            std::string::npos);
  write("file", "x");
  EXPECT_NE(usage_error([&] { check_output("--out", path("file/r.jsonl"), OutputUse::log); })
                .find("is a regular file, not a directory"),
            std::string::npos);
  fs::create_symlink("no/where.json", path("dangling"));
  EXPECT_NE(usage_error([&] { check_output("--json", path("dangling"), OutputUse::document); })
                .find("is a symbolic link to " + path("no/where.json") + ", and the directory"),
            std::string::npos);
  fs::create_symlink("loop-b", path("loop-a"));
  fs::create_symlink("loop-a", path("loop-b"));
  EXPECT_NE(usage_error([&] { check_output("--json", path("loop-a"), OutputUse::document); })
                .find("symbolic links"),
            std::string::npos);
  EXPECT_EQ(names(), (std::vector<std::string>{"dangling", "file", "loop-a", "loop-b"}));  // nothing created
}

TEST_F(OutputFiles, LinksResolveToTheirFinalTarget) {
  fs::create_directories(path("real"));
  write("real/r.json", "old\n");
  fs::create_symlink("real/r.json", path("link"));
  fs::create_symlink("link", path("link2"));
  const OutputTarget through = check_output("--json", path("link2"), OutputUse::document);
  EXPECT_EQ(through.kind, OutputKind::regular_file);
  EXPECT_EQ(fs::path(through.file), fs::path(path("real/r.json")));
  fs::create_symlink("real/new.json", path("dangling"));
  EXPECT_EQ(fs::path(check_output("--json", path("dangling"), OutputUse::document).file), fs::path(path("real/new.json")));
  EXPECT_EQ(check_output("--json", "/dev/null", OutputUse::document).kind, OutputKind::character_device);
  EXPECT_EQ(check_output("--json", "-", OutputUse::document).kind, OutputKind::standard_output);
}

TEST_F(OutputFiles, TwoOutputsOnOneFileOrTwoOnStdoutAreRefused) {
  write("r.jsonl", three_records());
  fs::create_symlink("r.jsonl", path("link.json"));
  const std::string out = path("r.jsonl");
  EXPECT_NE(usage_error([&] { check_outputs({out, out, "", ""}); })
                .find("--json " + out + " is the same file as --out " + out + ": writing it would destroy the records"),
            std::string::npos);
  EXPECT_NE(usage_error([&] { check_outputs({out, "", path("link.json"), ""}); }).find("is the same file as --out"),
            std::string::npos);
  // Neither exists: compared by their resolved paths.
  EXPECT_NE(usage_error([&] { check_outputs({"", "", path("a.csv"), directory_.string() + "/./a.csv"}); })
                .find("--md " + directory_.string() + "/./a.csv is the same file as --csv " + path("a.csv")),
            std::string::npos);
  EXPECT_NE(usage_error([&] { check_outputs({"-", "-", "", ""}); }).find("--out - and --json -: only one output"),
            std::string::npos);
  EXPECT_NE(usage_error([&] { check_outputs({"", "", "-", "-"}); }).find("--csv - and --md -"), std::string::npos);
  EXPECT_TRUE(check_outputs({out, "-", path("r.csv"), ""}).uses_stdout());
  EXPECT_FALSE(check_outputs({out, path("r.json"), path("r.csv"), path("r.md")}).uses_stdout());
  EXPECT_EQ(read("r.jsonl"), three_records());
}

TEST_F(OutputFiles, SaveDirectoryIsADirectoryOrCanBeCreated) {
  write("file", "x");
  EXPECT_NE(usage_error([&] { check_save_directory(path("file"), {"q.npy"}); }).find("is a regular file, not a directory"),
            std::string::npos);
  EXPECT_NE(usage_error([&] { check_save_directory(path("file/sub"), {"q.npy"}); }).find("cannot create it: " + path("file")),
            std::string::npos);
  EXPECT_EQ(usage_error([&] { check_save_directory(path("new/deeper/saved"), {"q.npy"}); }), "");
  fs::create_directories(path("saved/q.npy"));
  EXPECT_NE(usage_error([&] { check_save_directory(path("saved"), {"q.npy"}); }).find("q.npy is a directory"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(path("new")));
}

// --- Writing documents ---

TEST_F(OutputFiles, ADocumentKeepsItsPermissionBitsAndItsLink) {
  fs::create_directories(path("real"));
  write("real/r.json", "old\n");
  ::chmod(path("real/r.json").c_str(), 0640);
  fs::create_symlink("real/r.json", path("link"));
  write_document(check_output("--json", path("link"), OutputUse::document), "new\n");
  EXPECT_TRUE(fs::is_symlink(path("link")));
  EXPECT_EQ(read("real/r.json"), "new\n");
  struct stat status {};
  ASSERT_EQ(::stat(path("real/r.json").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0640u);
  // A new file gets 0666 less the umask, as open(2) would give it.
  const mode_t mask = ::umask(022);
  write_document(check_output("--csv", path("new.csv"), OutputUse::document), "a,b\n");
  ::umask(mask);
  ASSERT_EQ(::stat(path("new.csv").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0644u);
  EXPECT_EQ(names(), (std::vector<std::string>{"link", "new.csv", "real"}));
}

TEST_F(OutputFiles, AFailedWriteLeavesTheOldDocumentAndNoTemporaryFile) {
  write("r.json", "old document\n");
  const OutputTarget target = check_output("--json", path("r.json"), OutputUse::document);
  // A file-size limit, as a full disk would: the temporary file cannot grow past 1 KiB.
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  const rlimit limit{1024, saved.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::string message;
  try {
    write_document(target, std::string(4096, 'x'));
  } catch (const OutputError& error) {
    message = error.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(message, "--json " + path("r.json") + ": write failed: File too large");
  EXPECT_EQ(read("r.json"), "old document\n");
  EXPECT_EQ(names(), std::vector<std::string>{"r.json"});
}

// A process that the first signal ends (compare, report, merge: progress.hpp's exit_on_first_interrupt)
// removes the document it was writing: status 130 and no temporary file left. A sweep's first signal ends
// nothing (it finishes the case and writes what it has), so the file stays until its second.
TEST_F(OutputFiles, AnInterruptRemovesTheDocumentBeingWritten) {
  const std::string partial = path("r.json.partial.AbCdEf");
  auto signalled = [&](bool at_once, int signals) {
    const pid_t child = fork();
    if (child == 0) {
      install_interrupt_handler();
      if (at_once) exit_on_first_interrupt();
      std::ofstream(partial) << "{\"records\": [";
      remove_on_interrupt(partial);
      for (int i = 0; i < signals; ++i) std::raise(SIGTERM);
      _exit(0);
    }
    int raw = 0;
    waitpid(child, &raw, 0);
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  };
  EXPECT_EQ(signalled(/*at_once=*/true, 1), 130);
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_EQ(signalled(/*at_once=*/false, 1), 0);
  EXPECT_TRUE(fs::exists(partial));
  EXPECT_EQ(signalled(/*at_once=*/false, 2), 130);
  EXPECT_FALSE(fs::exists(partial));
}

TEST_F(OutputFiles, ACharacterDeviceIsWrittenDirectly) {
  write_document(check_output("--md", "/dev/null", OutputUse::document), "| a |\n");
  try {
    write_document(check_output("--md", "/dev/full", OutputUse::document), "| a |\n");
    ADD_FAILURE() << "a write to /dev/full succeeded";
  } catch (const OutputError& error) {
    EXPECT_STREQ(error.what(), "--md /dev/full: write failed: No space left on device");
  }
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
}

// --- The --out file ---

TEST_F(OutputFiles, OutIsLockedWhileItIsOpen) {
  const OutputTarget target = check_output("--out", path("r.jsonl"), OutputUse::log);
  {
    AppendFile first(target);
    EXPECT_FALSE(first.append("line\n"));
    // flock locks belong to the open file, so a second open in this same process conflicts as another
    // process's would.
    EXPECT_EQ(usage_error([&] { AppendFile second(target); }),
              "--out " + path("r.jsonl") + " is in use by another faprobe process (locked); wait for it to finish "
                                           "or use another --out");
  }
  AppendFile again(target);  // released with the first
  EXPECT_FALSE(again.append("more\n"));
  EXPECT_EQ(again.read_all(1 << 20), "line\nmore\n");
  again.truncate(5);
  EXPECT_FALSE(again.append("end\n"));
  EXPECT_EQ(read("r.jsonl"), "line\nend\n");
}

// merge --out: of two processes that checked one new name before either wrote it (the race of two merges
// into one --out), exactly one writes it; the other is refused in one line and replaces nothing, and no
// temporary file is left behind.
TEST_F(OutputFiles, ANewDocumentIsWrittenByExactlyOneOfTwoWritersAndNeverReplaced) {
  const OutputTarget first = check_output("--out", path("merged.jsonl"), OutputUse::document);
  const OutputTarget second = check_output("--out", path("merged.jsonl"), OutputUse::document);
  write_new_document(first, "first\n");
  const std::string message = usage_error([&] { write_new_document(second, "second\n"); });
  EXPECT_EQ(message, "--out " + path("merged.jsonl") +
                         ": was created by another process while this one ran; it is left as it is and this result "
                         "was not written (give a new file)");
  EXPECT_EQ(read("merged.jsonl"), "first\n");
  EXPECT_EQ(names(), std::vector<std::string>{"merged.jsonl"});
  // A file put there by anything else is not replaced either.
  write("other.jsonl", "theirs\n");
  EXPECT_NE(usage_error([&] {
              write_new_document(check_output("--out", path("other.jsonl"), OutputUse::document), "mine\n");
            }).find("was created by another process"),
            std::string::npos);
  EXPECT_EQ(read("other.jsonl"), "theirs\n");
}

}  // namespace
}  // namespace faprobe
