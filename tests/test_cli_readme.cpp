// The README's shown commands print what it shows (scripts/readme-examples: every `<!-- example -->` block run
// in a scratch folder, compared up to the numbers), and the checker itself catches a README gone stale: a
// column added to the output but not to the README, a status that changed, a shown line the program no
// longer prints, and a command that fails.
#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "cli_support.hpp"

namespace faprobe {
namespace {

class CliReadme : public Cli {
 protected:
  // scripts/readme-examples over `readme` (default: the repository's README) with this build's faprobe.
  Result examples(const std::string& readme = FAPROBE_SOURCE_DIR "/README.md", const std::string& extra = "") const {
    return shell("/usr/bin/python3 '" FAPROBE_SOURCE_DIR "/scripts/readme-examples' --faprobe '" FAPROBE_BINARY
                 "' --readme '" + readme + "' " + extra);
  }
  // A README of one example: `block` inside a fenced block after the marker.
  std::string readme(const std::string& name, const std::string& block) const {
    write(name, "# a README\n\n<!-- example -->\n```\n" + block + "```\n");
    return path(name).string();
  }
};

TEST_F(CliReadme, EveryShownCommandPrintsWhatTheReadmeShows) {
  const Result checked = examples();
  EXPECT_EQ(checked.status, 0) << checked.out << checked.err;
  EXPECT_NE(checked.out.find("print what the README shows"), std::string::npos) << checked.out;
}

// A real command's real output passes whatever its numbers; each planted change to the shown lines fails, and
// names the line.
TEST_F(CliReadme, APlantedStaleLineIsCaught) {
  const std::string args = "run --impl cpu.naive --seq 64 --heads 2 --head-dim 16 --min-time 0 --min-samples 3 --warmup 0 --max-noise 100";
  const std::string command = "$ faprobe " + args + "\n";
  // What it prints, stdout and stderr in the order printed, as the checker reads it.
  const Result real = shell("sh -c \"'" FAPROBE_BINARY "' " + args + " 2>&1\"");
  ASSERT_EQ(real.status, 0) << real.err;
  const std::string shown = real.out;
  // The numbers of another machine: every digit changed, and with it the units' and columns' widths.
  std::string other = shown;
  for (char& ch : other)
    if (ch >= '0' && ch <= '8') ch = static_cast<char>(ch + 1);
  const Result same = examples(readme("same.md", command + other));
  EXPECT_EQ(same.status, 0) << same.err;

  // What one machine's rates decide beyond the numbers (a bandwidth above the copy rate marked '*', with its
  // note) is not compared: the same output without them passes.
  std::string uncached;
  std::istringstream lines(shown);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("*: above 100 %") != std::string::npos) continue;
    line.erase(std::remove(line.begin(), line.end(), '*'), line.end());
    uncached += line + "\n";
  }
  EXPECT_EQ(examples(readme("uncached.md", command + uncached)).status, 0);

  // A header without a column the program prints.
  std::string header = shown;
  const std::size_t check = header.find("check");
  ASSERT_NE(check, std::string::npos) << shown;
  header.erase(check, 5);
  const Result stale_header = examples(readme("header.md", command + header));
  EXPECT_EQ(stale_header.status, 1) << stale_header.err;
  EXPECT_NE(stale_header.err.find("shown:"), std::string::npos) << stale_header.err;

  // A status the program no longer prints.
  std::string status = shown;
  const std::size_t ok = status.find(" ok ");
  ASSERT_NE(ok, std::string::npos) << shown;
  status.replace(ok, 4, " skipped ");
  EXPECT_EQ(examples(readme("status.md", command + status)).status, 1);

  // A line shown that nothing prints, and an output cut short without '...'.
  EXPECT_EQ(examples(readme("extra.md", command + shown + "wrote results.jsonl\n")).status, 1);
  EXPECT_EQ(examples(readme("short.md", command + shown.substr(0, shown.find('\n') + 1))).status, 1);
  // ... and the same cut marked as an abridgement passes.
  EXPECT_EQ(examples(readme("abridged.md", command + shown.substr(0, shown.find('\n') + 1) + "...\n")).status, 0);

  // A command whose flag no longer exists prints its error, not the table.
  const Result renamed = examples(readme("flag.md", "$ faprobe run --impl cpu.naive --seqs 64 --min-time 0\n" + shown));
  EXPECT_EQ(renamed.status, 1) << renamed.err;
}

// --update rewrites a stale output with what the command prints, and the rewritten README then passes.
TEST_F(CliReadme, UpdateRewritesTheShownOutput) {
  const std::string name = readme("update.md", "$ faprobe sweep --seq 512..64\nfaprobe: something else\n");
  ASSERT_EQ(examples(name).status, 1);
  const Result update = examples(name, "--update");
  ASSERT_EQ(update.status, 0) << update.err;
  EXPECT_NE(read_file(name).find("range '512..64' is empty"), std::string::npos) << read_file(name);
  EXPECT_EQ(examples(name).status, 0);
}

}  // namespace
}  // namespace faprobe
