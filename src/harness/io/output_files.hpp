// Files faprobe writes: the --out JSONL (appended to), the --json, --csv and --md documents (replaced whole),
// and run --save's directory. A result file is never destroyed or left half-written:
//
// - Every path is checked before anything runs, without side effects (check_outputs): its directory must
//   exist and be writable, an existing file must be writable, and a FIFO, socket, block device or directory
//   is refused (never replaced by a regular file, never opened to block on). No two outputs may be the same
//   file (a document written over --out would destroy its records), and at most one may be "-" (stdout).
// - A document is written beside its target and renamed onto it, so a reader, a crash or a full disk never
//   leaves half a document: the old one stays until the new one is complete; an interrupt that ends the
//   process removes the temporary file (progress.hpp). A symbolic link is written
//   through (its final target is replaced, the link stays a link); an existing file keeps its permission
//   bits. A character device (/dev/null, a terminal) is written directly, once, at the end.
// - The --out file is opened for appending and locked (flock) for the run, so that two faprobe processes
//   never append to one file at once; the lock is on a descriptor that isolated children do not inherit.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace faprobe {

// What an output path is, once checked.
enum class OutputKind {
  standard_output,   // "-"
  regular_file,      // an existing regular file or a new one (symbolic links resolved)
  character_device,  // /dev/null, a terminal: written directly
};

struct OutputTarget {
  std::string flag;  // "--json"
  std::string path;  // as given
  OutputKind kind = OutputKind::regular_file;
  std::string file;  // what is written: `path` with its symbolic links resolved ("-" for stdout)

  std::string name() const { return flag + " " + path; }  // "--json r.json", for messages
  // Documents are rewritten while a run goes on only where a reader sees whole versions of them.
  bool rewritable() const { return kind == OutputKind::regular_file; }
};

// How a path is written: a document is replaced whole, a log (--out) is appended to.
enum class OutputUse { document, log };

// Checks one output path without touching the file system; throws UsageError "<flag> <path>: <why>".
OutputTarget check_output(std::string_view flag, const std::string& path, OutputUse use);

// The output paths of a run, as given ("" = none, "-" = stdout).
struct OutputPaths {
  std::string out, json, csv, md;
};

struct OutputTargets {
  std::optional<OutputTarget> out, json, csv, md;
  std::vector<const OutputTarget*> documents() const;  // json, csv, md, those given
  bool uses_stdout() const;  // one of them is "-": stdout then carries that file alone
};

// check_output for each, then the rules between them: at most one "-", no two the same file. Throws
// UsageError naming both flags.
OutputTargets check_outputs(const OutputPaths& paths);

// run --save DIR: DIR is a directory faprobe can write, or can be created below one; the files it will
// hold (q.npy k.npy v.npy o.npy case.json) are regular files or absent. Throws UsageError "--save DIR: ...".
void check_save_directory(const std::string& directory, const std::vector<std::string>& file_names);

// Writes a whole document to a checked target: stdout, a character device (directly), or a regular file
// (a unique temporary file beside the target, synced, given the target's permission bits, renamed onto it;
// removed again on any failure, leaving the old document in place). Throws OutputError
// "<flag> <path>: write failed: <why>".
void write_document(const OutputTarget& target, std::string_view text);

// write_document for a file that must be new (merge --out): a regular file is published under its name only
// if nothing has that name by then, so that of two processes writing one new name exactly one succeeds; the
// other gets a UsageError "<flag> <path>: was created by another process ...", and the file is left as the
// first wrote it. Anything else (stdout, a device) is written as write_document writes it.
void write_new_document(const OutputTarget& target, std::string_view text);

// The --out file, open for appending. A regular file is locked (flock LOCK_EX | LOCK_NB) until the object is
// destroyed; its descriptor is close-on-exec, so isolated children (runner.cpp) never hold the lock.
class AppendFile {
 public:
  // Opens (creating a regular file) and locks; throws UsageError when it cannot, or when another process
  // holds the lock.
  explicit AppendFile(const OutputTarget& target);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  const OutputTarget& target() const { return target_; }
  bool resumable() const { return target_.kind == OutputKind::regular_file; }  // can be read back
  // The file's bytes as they are now (a regular file of at most `max_bytes`; UsageError otherwise).
  std::string read_all(std::uint64_t max_bytes) const;
  // Cuts the file to `size` bytes (a torn last line dropped); throws OutputError.
  void truncate(std::uint64_t size);
  // Writes every byte at the end of the file; the error that stopped it otherwise (a short write followed
  // by EFBIG or ENOSPC, EIO, ...), with nothing written after it.
  std::error_code append(std::string_view bytes);

 private:
  OutputTarget target_;
  int fd_ = -1;
};

}  // namespace faprobe
