// The command line's result files end to end (src/harness/io/output_files.hpp): outputs checked before
// anything is measured, documents written through links, onto devices and never over --out, stdout carrying
// one file alone, a full disk (a real file-size limit) ending a sweep that --resume then completes, a resumed
// file's torn line, missing newline and hostile records, and --out locked against a second process.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"

namespace faprobe {
namespace {

// Two cases of one implementation, each a few milliseconds.
constexpr const char* kTiny = " --impl cpu.tiled --seq 17,64 --heads 2 --head-dim 16 --min-samples 2 --min-time 0 "
                              "--max-noise 100 --max-time 1 --warmup 0";

// Ten pairs, for a file long enough to cut in the middle.
constexpr const char* kTen = " --impl cpu.tiled,cpu.naive --seq 17,33,48,64,80 --heads 2 --head-dim 16 --min-samples 2 "
                             "--min-time 0 --max-noise 100 --max-time 1 --warmup 0";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

std::string last_line(const std::string& text) {
  const auto lines = lines_of(text);
  return lines.empty() ? "" : lines.back();
}

// A prefix for Cli::faprobe's `env` that runs faprobe with writes past `blocks` × 512 bytes failing with
// EFBIG, as on a full disk: SIGXFSZ ignored (its default kills), then the shell's file-size limit.
std::string file_size_limit(std::uint64_t blocks) {
  return "sh -c 'trap \"\" XFSZ; ulimit -f " + std::to_string(blocks) + "; exec \"$0\" \"$@\"'";
}

// A prefix that runs faprobe as nobody, for permission checks when the tests run as root (whom permission
// bits do not stop); "" when this process is not root; nullopt when it cannot drop privileges here.
std::optional<std::string> unprivileged() {
  if (::geteuid() != 0) return "";
  const std::string prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups";
  if (std::system((prefix + " true >/dev/null 2>&1").c_str()) != 0) return std::nullopt;
  return prefix;
}

int stderr_lines(const Result& run) { return int(std::count(run.err.begin(), run.err.end(), '\n')); }

// --- Checked before anything runs ---

TEST_F(Cli, NonRegularOutputsAreRefusedBeforeAnythingRuns) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  fs::create_directories(path("dir"));
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path("sock").string().size(), sizeof(address.sun_path));
  std::strcpy(address.sun_path, path("sock").c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  std::vector<std::pair<std::string, std::string>> targets = {
      {"fifo", "a FIFO"}, {"dir", "a directory"}, {"sock", "a socket"}};
  // A block device node of our own (root only): never opened, and before the fix renamed over.
  if (::mknod(path("block").c_str(), S_IFBLK | 0600, makedev(7, 250)) == 0) targets.push_back({"block", "a block device"});
  for (const std::string flag : {"--json", "--csv", "--md", "--out"}) {
    for (const auto& [name, kind] : targets) {
      const std::string out = flag == "--out" ? "" : " --out new.jsonl";
      const auto start = std::chrono::steady_clock::now();
      const Result run = faprobe("sweep " + flag + " " + name + out + kTiny);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_EQ(run.status, 2) << flag << " " << name << "\n" << run.err;
      EXPECT_EQ(run.err.rfind("faprobe: " + flag + " " + name + ": is " + kind + ", not a regular file", 0), 0u)
          << run.err;
      EXPECT_EQ(stderr_lines(run), 1) << run.err;
      EXPECT_TRUE(run.out.empty()) << run.out;
      EXPECT_FALSE(fs::exists(path("new.jsonl"))) << flag << " " << name;  // nothing opened
      EXPECT_LT(seconds, 1.0) << "the host calibration (a second) ran before the refusal";
    }
  }
  ::close(sock);
  EXPECT_TRUE(fs::is_fifo(path("fifo")));
  EXPECT_TRUE(fs::is_socket(path("sock")));
  EXPECT_TRUE(fs::is_directory(path("dir")));
  if (targets.size() == 4) {
    EXPECT_TRUE(fs::is_block_file(path("block")));
  }
}

TEST_F(Cli, UnwritableOutputsAreRefusedBeforeTheCalibration) {
  write("file", "x");
  const std::string one_case = " --impl cpu.tiled --seq 17 --heads 2 --head-dim 16";
  const std::pair<std::string, std::string> cases[] = {
      {"sweep --out missing/r.jsonl", "--out missing/r.jsonl: the directory missing does not exist"},
      {"sweep --out r.jsonl --json missing/r.json", "--json missing/r.json: the directory missing does not exist"},
      {"sweep --out r.jsonl --csv file/r.csv", "--csv file/r.csv: file is a regular file, not a directory"},
      {"verify --out r.jsonl --md missing/r.md", "--md missing/r.md: the directory missing does not exist"},
      {"run --save file", "--save file: is a regular file, not a directory"},
      {"run --save file/sub", "--save file/sub: cannot create it: file is a regular file, not a directory"},
  };
  for (const auto& [command, message] : cases) {
    const auto start = std::chrono::steady_clock::now();
    const Result run = faprobe(command + (command.rfind("run", 0) == 0 ? one_case : std::string(kTiny)));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(run.status, 2) << command << "\n" << run.err;
    EXPECT_EQ(run.err, "faprobe: " + message + "\n") << command;
    if (command.rfind("verify", 0) != 0) {  // verify calibrates for 0.2 s only
      EXPECT_LT(seconds, 1.0) << command << ": the calibration ran first";
    }
  }
  EXPECT_FALSE(fs::exists(path("r.jsonl")));
}

TEST_F(Cli, ReadOnlyFilesAndDirectoriesAreRefusedBeforeTheCalibration) {
  const std::optional<std::string> as_user = unprivileged();
  if (!as_user) GTEST_SKIP() << "running as root, and setpriv cannot drop privileges here";
  fs::create_directories(path("locked"));
  write("locked/r.json", "old\n");
  write("read-only.jsonl", "");
  ::chmod(path("locked/r.json").c_str(), 0666);  // writable itself: its directory is what refuses
  ::chmod(path("locked").c_str(), 0555);
  ::chmod(path("read-only.jsonl").c_str(), 0444);
  ::chmod(directory_.c_str(), 0755);
  const std::pair<std::string, std::string> cases[] = {
      {"--out read-only.jsonl", "--out read-only.jsonl: the file is not writable (Permission denied)"},
      {"--out locked/new.jsonl", "--out locked/new.jsonl: cannot create files in locked (Permission denied)"},
      {"--json locked/r.json --out /dev/null",
       "--json locked/r.json: cannot replace the file: its directory locked is not writable (Permission denied)"},
  };
  for (const auto& [args, message] : cases) {
    const auto start = std::chrono::steady_clock::now();
    const Result run = faprobe("sweep " + args + kTiny, *as_user);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(run.status, 2) << args << "\n" << run.err;
    EXPECT_EQ(run.err, "faprobe: " + message + "\n") << args;
    EXPECT_LT(seconds, 1.0) << args << ": the calibration ran first";
  }
  EXPECT_EQ(read_file(path("locked/r.json")), "old\n");
  ::chmod(path("locked").c_str(), 0755);
}

// --- Documents ---

TEST_F(Cli, ADocumentOnTheSameFileAsOutOrAnotherDocumentIsRefused) {
  ASSERT_EQ(faprobe("sweep --out r.jsonl" + std::string(kTiny)).status, 0);
  const std::string records = read_file(path("r.jsonl"));
  ASSERT_EQ(lines_of(records).size(), 2u);
  fs::create_symlink("r.jsonl", path("link.json"));
  const std::pair<std::string, std::string> cases[] = {
      {"--out r.jsonl --json r.jsonl", "--json r.jsonl is the same file as --out r.jsonl: writing it would destroy"},
      {"--out r.jsonl --csv ./r.jsonl", "--csv ./r.jsonl is the same file as --out r.jsonl"},
      {"--out r.jsonl --md link.json", "--md link.json is the same file as --out r.jsonl"},
      {"--out o.jsonl --csv a.csv --md ./a.csv", "--md ./a.csv is the same file as --csv a.csv"},
      {"--out o.jsonl --json - --csv -", "--json - and --csv -: only one output can go to stdout"},
      {"--out - --md -", "--out - and --md -: only one output can go to stdout"},
  };
  for (const auto& [args, fragment] : cases) {
    const Result run = faprobe("sweep --resume " + args + kTiny);
    EXPECT_EQ(run.status, 2) << args << "\n" << run.err;
    EXPECT_EQ(run.err.rfind("faprobe: " + fragment, 0), 0u) << args << "\n" << run.err;
    EXPECT_EQ(stderr_lines(run), 1) << run.err;
  }
  EXPECT_EQ(read_file(path("r.jsonl")), records);  // the records survive
  EXPECT_TRUE(fs::is_symlink(path("link.json")));
  EXPECT_FALSE(fs::exists(path("a.csv")));
}

TEST_F(Cli, ALinkedDocumentIsWrittenThroughAndStaysALink) {
  fs::create_directories(path("results"));
  write("results/r.json", "old\n");
  fs::create_symlink("results/r.json", path("r.json"));
  fs::create_symlink("results/r.csv", path("r.csv"));        // dangling, into a directory that exists
  fs::create_symlink("nowhere/r.md", path("r.md"));          // dangling, into one that does not
  const Result refused = faprobe("sweep --out r.jsonl --json r.json --csv r.csv --md r.md" + std::string(kTiny));
  EXPECT_EQ(refused.status, 2);
  EXPECT_EQ(refused.err, "faprobe: --md r.md: is a symbolic link to nowhere/r.md, and the directory nowhere does not "
                         "exist\n");
  const Result run = faprobe("sweep --out r.jsonl --json r.json --csv r.csv" + std::string(kTiny));
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(fs::is_symlink(path("r.json")));
  EXPECT_TRUE(fs::is_symlink(path("r.csv")));
  EXPECT_EQ(nlohmann::json::parse(read_file(path("results/r.json")))["records"].size(), 2u);
  EXPECT_EQ(lines_of(read_file(path("results/r.csv"))).size(), 3u);
  for (const auto& entry : fs::directory_iterator(path("results")))  // no temporary file left beside them
    EXPECT_TRUE(entry.path().filename() == "r.json" || entry.path().filename() == "r.csv") << entry.path();
}

TEST_F(Cli, AnExistingDocumentKeepsItsPermissionBits) {
  for (const char* name : {"r.json", "r.csv", "r.md"}) {
    write(name, "old\n");
    ::chmod(path(name).c_str(), 0640);
  }
  ASSERT_EQ(faprobe("sweep --out r.jsonl --json r.json --csv r.csv --md r.md" + std::string(kTiny)).status, 0);
  for (const char* name : {"r.json", "r.csv", "r.md"}) {
    struct stat status {};
    ASSERT_EQ(::stat(path(name).c_str(), &status), 0);
    EXPECT_EQ(status.st_mode & 07777, 0640u) << name;
    EXPECT_NE(read_file(path(name)), "old\n") << name;
  }
}

TEST_F(Cli, ACharacterDeviceGetsItsDocumentOnceAtTheEnd) {
  // A pseudo-terminal: whatever faprobe writes to its name arrives here, each write in full.
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const std::string terminal = ::ptsname(master);
  const int keep_open = ::open(terminal.c_str(), O_RDWR | O_NOCTTY);  // the master reads EIO once none is open
  ASSERT_GE(keep_open, 0);
  termios raw{};
  ::tcgetattr(keep_open, &raw);
  ::cfmakeraw(&raw);  // no "\n" -> "\r\n"
  ::tcsetattr(keep_open, TCSANOW, &raw);
  std::atomic<bool> finished{false};
  Result run;
  // Rewritten per record (at most once a second) a regular file would be written several times; three
  // cases of a second each make that show.
  std::thread sweep([&] {
    run = faprobe("sweep --out r.jsonl --json " + terminal +
                  " --impl cpu.tiled --seq 17,33,64 --heads 2 --head-dim 16 --min-samples 1 --min-time 0.6 "
                  "--max-noise 0 --max-time 1 --warmup 0");
    finished = true;
  });
  std::string received;
  for (;;) {
    pollfd fd{master, POLLIN, 0};
    if (::poll(&fd, 1, 100) > 0 && (fd.revents & POLLIN)) {
      char buffer[4096];
      const ssize_t n = ::read(master, buffer, sizeof(buffer));
      if (n > 0) received.append(buffer, std::size_t(n));
      continue;
    }
    if (finished) break;
  }
  sweep.join();
  ::close(keep_open);
  ::close(master);
  ASSERT_EQ(run.status, 0) << run.err;
  nlohmann::json document;
  ASSERT_NO_THROW(document = nlohmann::json::parse(received)) << "not one JSON document:\n" << received;
  EXPECT_EQ(document["records"].size(), 3u);
  EXPECT_TRUE(fs::is_character_file(terminal) || !fs::exists(terminal));
  const Result null = faprobe("sweep --out r2.jsonl --json /dev/null --csv /dev/zero" + std::string(kTiny));
  EXPECT_EQ(null.status, 0) << null.err;
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

// --- stdout ---

TEST_F(Cli, StdoutCarriesOneDocumentAloneAndTheTableGoesToStderr) {
  const Result json = faprobe("sweep --out r.jsonl --json -" + std::string(kTiny));
  ASSERT_EQ(json.status, 0) << json.err;
  nlohmann::json document;
  ASSERT_NO_THROW(document = nlohmann::json::parse(json.out)) << json.out;
  EXPECT_EQ(document["records"].size(), 2u);
  EXPECT_NE(json.err.find("cpu.tiled          b1 h2 s17"), std::string::npos) << json.err;  // the table

  const Result csv = faprobe("sweep --out r2.jsonl --csv -" + std::string(kTiny));
  ASSERT_EQ(csv.status, 0) << csv.err;
  const auto rows = lines_of(csv.out);
  ASSERT_EQ(rows.size(), 3u) << csv.out;
  EXPECT_EQ(rows[0].rfind("impl,device,batch", 0), 0u) << rows[0];
  auto fields = [](const std::string& row) {  // commas outside quotes, plus one
    int count = 1;
    bool quoted = false;
    for (const char ch : row) {
      if (ch == '"') quoted = !quoted;
      count += ch == ',' && !quoted;
    }
    return count;
  };
  for (const std::string& row : rows) EXPECT_EQ(fields(row), fields(rows[0])) << row;

  const Result md = faprobe("sweep --out r3.jsonl --md -" + std::string(kTiny));
  ASSERT_EQ(md.status, 0) << md.err;
  // The table's four rows, and nothing else but the legends of its marks: "busy" (a busy machine) and "*" (a
  // bandwidth above the copy rate: data in cache).
  std::vector<std::string> md_rows;
  for (const std::string& line : lines_of(md.out)) {
    if (!line.empty() && line.front() == '|') {
      md_rows.push_back(line);
    } else if (!line.empty()) {
      EXPECT_TRUE(line == kBusyLegend || line == std::string("\\") + kCacheLegend) << "not a table row: " << line;
    }
  }
  EXPECT_EQ(md_rows.size(), 4u) << md.out;

  const Result jsonl = faprobe("sweep --out -" + std::string(kTiny));
  ASSERT_EQ(jsonl.status, 0) << jsonl.err;
  const auto records = lines_of(jsonl.out);
  ASSERT_EQ(records.size(), 2u) << jsonl.out;
  for (const std::string& line : records) EXPECT_NO_THROW(nlohmann::json::parse(line).get<Record>()) << line;

  const Result run = faprobe("run --json - --impl cpu.tiled --seq 17 --heads 2 --head-dim 16 --min-samples 1 --min-time 0");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["records"].size(), 1u);
  EXPECT_EQ(faprobe("sweep --out - --resume" + std::string(kTiny)).status, 2);  // nothing to read back
}

// --- A full disk, and --resume after it ---

TEST_F(Cli, AFullDiskEndsTheSweepAndResumeCompletesIt) {
  // The sizes of this sweep's lines, from a run without a limit, then the same sweep limited so that the limit
  // falls three quarters into the sixth record (blocks of 512 bytes): it is torn mid-line. A line's size
  // differs from run to run by the digits of its times and, on a busy machine, by a contended record's
  // evidence (time_s.contended, a few hundred bytes), which may move the sixth record past the limit or the
  // limit past it; so up to three tries, each sizing the limit on a run just before, until the tear lands in
  // the sixth record.
  Result limited;
  std::uint64_t blocks = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    fs::remove(path("full.jsonl"));
    fs::remove(path("r.jsonl"));
    ASSERT_EQ(faprobe("sweep --out full.jsonl" + std::string(kTen)).status, 0);
    const auto full = lines_of(read_file(path("full.jsonl")));
    ASSERT_EQ(full.size(), 10u);
    std::uint64_t sixth_starts = 0;
    for (int i = 0; i < 5; ++i) sixth_starts += full[std::size_t(i)].size() + 1;
    blocks = (sixth_starts + full[5].size() * 3 / 4) / 512;
    ASSERT_GT(blocks * 512, sixth_starts + 64);
    limited = faprobe("sweep --out r.jsonl" + std::string(kTen), file_size_limit(blocks));
    if (last_line(limited.err).find("the 5 records before it") != std::string::npos) break;
  }
  EXPECT_EQ(limited.status, 1) << limited.err;
  EXPECT_EQ(last_line(limited.err), "faprobe: --out r.jsonl: write failed: File too large; the 5 records before it "
                                    "are on disk; run again with --resume to continue")
      << limited.err;
  const std::string torn = read_file(path("r.jsonl"));
  ASSERT_EQ(torn.size(), blocks * 512);
  ASSERT_NE(torn.back(), '\n');  // the sixth record, cut short
  const std::vector<Record> before = parse_resume_jsonl(torn, "r.jsonl").records;
  ASSERT_EQ(before.size(), 5u);

  const Result resumed = faprobe("sweep --resume --out r.jsonl" + std::string(kTen));
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(lines_of(resumed.err).front().rfind("faprobe: warning: r.jsonl:6: dropped a torn last line", 0), 0u)
      << resumed.err;
  const std::vector<Record> after = read_jsonl(path("r.jsonl").string());  // strict: no torn or glued line
  ASSERT_EQ(after.size(), 10u);
  std::set<std::string> keys;
  for (const Record& record : after) EXPECT_TRUE(keys.insert(record.key()).second) << record.key();
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_EQ(nlohmann::json(after[i]), nlohmann::json(before[i]));
  // The five records before the tear stay byte for byte (their lengths are those of this run's lines, which
  // differ from the unlimited run's by the digits of the times measured).
  const std::size_t kept = torn.rfind('\n') + 1;
  EXPECT_EQ(read_file(path("r.jsonl")).compare(0, kept, torn, 0, kept), 0);
  EXPECT_NE(resumed.err.find("(5 resumed)"), std::string::npos) << resumed.err;
}

TEST_F(Cli, DocumentsThatCannotBeWrittenAtTheEndExitOneAndKeepTheOldOnes) {
  // A full device: /dev/full fails every write with ENOSPC.
  const Result full = faprobe("sweep --out r.jsonl --json /dev/full" + std::string(kTiny));
  EXPECT_EQ(full.status, 1) << full.err;
  EXPECT_EQ(last_line(full.err), "faprobe: --json /dev/full: write failed: No space left on device; every record is "
                                 "in r.jsonl");
  EXPECT_EQ(read_jsonl(path("r.jsonl").string()).size(), 2u);
  EXPECT_EQ(full.err.find("wrote /dev/full"), std::string::npos) << full.err;

  const Result out_full = faprobe("sweep --out /dev/full" + std::string(kTiny));
  EXPECT_EQ(out_full.status, 1) << out_full.err;
  EXPECT_EQ(last_line(out_full.err), "faprobe: --out /dev/full: write failed: No space left on device");

  // A file-size limit that the JSONL fits under and the JSON document does not (one case, so that every
  // version of the document, the one after the first record included, is too large).
  // Two samples exactly (--max-noise 100): a record's size must not depend on how many the load asked for.
  const std::string one_case =
      " --impl cpu.tiled --seq 17 --heads 2 --head-dim 16 --min-samples 2 --min-time 0 --max-noise 100";
  ASSERT_EQ(faprobe("sweep --out sizes.jsonl --json sizes.json" + one_case).status, 0);
  const std::uint64_t jsonl_bytes = fs::file_size(path("sizes.jsonl")), json_bytes = fs::file_size(path("sizes.json"));
  const std::uint64_t blocks = (jsonl_bytes + 300 + 511) / 512;
  ASSERT_LT(blocks * 512 + 200, json_bytes);
  write("r.json", "old document\n");
  fs::remove(path("r.jsonl"));
  const Result limited = faprobe("sweep --out r.jsonl --json r.json" + one_case, file_size_limit(blocks));
  EXPECT_EQ(limited.status, 1) << limited.err;
  EXPECT_EQ(last_line(limited.err), "faprobe: --json r.json: write failed: File too large; every record is in r.jsonl");
  EXPECT_EQ(read_file(path("r.json")), "old document\n");
  EXPECT_EQ(read_jsonl(path("r.jsonl").string()).size(), 1u);
  for (const auto& entry : fs::directory_iterator(directory_))
    EXPECT_EQ(entry.path().filename().string().find(".partial"), std::string::npos) << entry.path();
}

// --- --resume ---

TEST_F(Cli, ResumeRepairsATornLineAndAMissingNewlineAndRefusesACorruptOne) {
  ASSERT_EQ(faprobe("sweep --out full.jsonl" + std::string(kTen)).status, 0);
  const auto full = lines_of(read_file(path("full.jsonl")));
  ASSERT_EQ(full.size(), 10u);
  const std::string three = full[0] + "\n" + full[1] + "\n" + full[2] + "\n";
  // Torn just after a closing brace (the case object's): the old reader stopped at such a line.
  const std::string torn = full[3].substr(0, full[3].find('}') + 1);
  write("r.jsonl", three + torn);
  const Result resumed = faprobe("sweep --resume --out r.jsonl" + std::string(kTen));
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(lines_of(resumed.err).front(),
            "faprobe: warning: r.jsonl:4: dropped a torn last line (" + std::to_string(torn.size()) +
                " bytes of a write that did not finish)");
  auto records = read_jsonl(path("r.jsonl").string());
  EXPECT_EQ(records.size(), 10u);
  EXPECT_EQ(read_file(path("r.jsonl")).rfind(three, 0), 0u);

  // The last record complete but for its newline: kept (not measured again), and the newline added.
  write("r.jsonl", three + full[3]);
  const Result newline = faprobe("sweep --resume --out r.jsonl" + std::string(kTen));
  ASSERT_EQ(newline.status, 0) << newline.err;
  EXPECT_EQ(newline.err.find("warning"), std::string::npos) << newline.err;
  EXPECT_NE(newline.err.find("(4 resumed)"), std::string::npos) << newline.err;
  records = read_jsonl(path("r.jsonl").string());
  EXPECT_EQ(records.size(), 10u);
  EXPECT_EQ(read_file(path("r.jsonl")).rfind(three + full[3] + "\n", 0), 0u);

  // A bad line that is not the last is corruption: an error naming it, and the file left as it was.
  const std::string corrupt = full[0] + "\n" + full[1].substr(0, 40) + "\n" + full[2] + "\n";
  write("r.jsonl", corrupt);
  const Result refused = faprobe("sweep --resume --out r.jsonl" + std::string(kTen));
  EXPECT_EQ(refused.status, 2);
  EXPECT_EQ(refused.err.rfind("faprobe: r.jsonl:2: not a faprobe record", 0), 0u) << refused.err;
  EXPECT_EQ(stderr_lines(refused), 1) << refused.err;
  EXPECT_EQ(read_file(path("r.jsonl")), corrupt);
}

TEST_F(Cli, ResumedRecordsAreValidatedAndCountInTheSummaryAndExitStatus) {
  ASSERT_EQ(faprobe("sweep --out good.jsonl" + std::string(kTiny)).status, 0);
  const nlohmann::json record = nlohmann::json::parse(lines_of(read_file(path("good.jsonl"))).front());
  auto with = [&](const std::string& pointer, const nlohmann::json& value) {
    nlohmann::json changed = record;
    changed[nlohmann::json::json_pointer(pointer)] = value;
    return changed.dump() + "\n";
  };
  const std::pair<std::string, std::string> hostile[] = {
      {with("/case/batch", 0), "r.jsonl:1: not a valid case: --batch must be at least 1, got 0"},
      {with("/case/head_dim", -16), "r.jsonl:1: not a valid case: --head-dim must be at least 1, got -16"},
      {with("/case/batch", 1e300), "r.jsonl:1: not a faprobe record: case.batch: not an integer (1e+300)"},
      {with("/case/seq_q", std::int64_t(1) << 62), "r.jsonl:1: not a valid case: case"},
      {with("/memory/peak_bytes", -5), "r.jsonl:1: not a faprobe record: memory.peak_bytes: -5 is negative"},
  };
  for (const auto& [line, message] : hostile) {
    write("r.jsonl", line);
    const Result run = faprobe("sweep --resume --out r.jsonl" + std::string(kTiny));
    EXPECT_EQ(run.status, 2) << line << run.err;
    EXPECT_EQ(run.err.rfind("faprobe: " + message, 0), 0u) << run.err;
    EXPECT_EQ(stderr_lines(run), 1) << run.err;
  }
  // A resumed failure is still a failure: the summary counts it and the run exits 1.
  for (const auto& [status, count] : {std::pair{"failed", "0 mismatch, 1 failed"}, {"mismatch", "1 mismatch, 0 failed"}}) {
    write("r.jsonl", with("/status", status));
    const Result run = faprobe("sweep --resume --out r.jsonl" + std::string(kTiny));
    EXPECT_EQ(run.status, 1) << status << "\n" << run.err;
    EXPECT_NE(run.err.find(std::string("2 records: 1 ok, ") + count + ", 0 skipped, 0 unsupported (1 resumed)"),
              std::string::npos)
        << run.err;
    EXPECT_EQ(read_jsonl(path("r.jsonl").string()).size(), 2u);  // the resumed pair was not measured again
  }
}

// --- The lock ---

TEST_F(Cli, OutIsLockedAgainstASecondProcess) {
  const std::string message = "faprobe: --out r.jsonl is in use by another faprobe process (locked); wait for it to "
                              "finish or use another --out\n";
  {
    const int holder = ::open(path("r.jsonl").c_str(), O_RDWR | O_CREAT, 0644);  // this process holds it
    ASSERT_GE(holder, 0);
    ASSERT_EQ(::flock(holder, LOCK_EX), 0);
    const auto start = std::chrono::steady_clock::now();
    const Result run = faprobe("sweep --resume --out r.jsonl" + std::string(kTiny));
    EXPECT_EQ(run.status, 2) << run.err;
    EXPECT_EQ(run.err, message);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
    ::close(holder);
  }

  // A sweep whose second case hangs in an isolated child: the parent holds the lock, the child must not.
  const pid_t first = fork();
  ASSERT_GE(first, 0);
  if (first == 0) {
    if (chdir(directory_.c_str()) != 0) _exit(99);
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(99);
    setenv("FAPROBE_TEST_FAULT", "hang@64", 1);
    execl("/bin/sh", "sh", "-c", ("exec '" FAPROBE_BINARY "' sweep --isolate --out r.jsonl" + std::string(kTiny)).c_str(),
          static_cast<char*>(nullptr));
    _exit(98);
  }
  // Wait for the hanging child: a process whose parent is the sweep.
  pid_t child = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (child == 0 && std::chrono::steady_clock::now() < deadline) {
    for (const auto& entry : fs::directory_iterator("/proc")) {
      const std::string name = entry.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::istringstream stat(read_file(entry.path() / "stat"));
      std::string pid, command, state;
      pid_t parent = 0;
      stat >> pid >> command >> state >> parent;
      if (parent == first) child = pid_t(std::stoi(name));
    }
    if (child == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(child, 0) << "no isolated child appeared";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past its exec
  const fs::path out = fs::canonical(path("r.jsonl"));
  std::error_code error;
  for (const auto& fd : fs::directory_iterator(fs::path("/proc") / std::to_string(child) / "fd", error)) {
    std::error_code link_error;
    EXPECT_NE(fs::read_symlink(fd.path(), link_error), out) << "the isolated child holds --out as " << fd.path();
  }
  const Result second = faprobe("sweep --resume --out r.jsonl" + std::string(kTiny));
  EXPECT_EQ(second.status, 2) << second.err;
  EXPECT_EQ(second.err, message);

  kill(first, SIGINT);
  int raw = 0;
  waitpid(first, &raw, 0);
  EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 130) << raw;
  const Result after = faprobe("sweep --resume --out r.jsonl" + std::string(kTiny));  // released with it
  EXPECT_EQ(after.status, 0) << after.err;
  EXPECT_EQ(read_jsonl(path("r.jsonl").string()).size(), 2u);
}

}  // namespace
}  // namespace faprobe
