#include "harness/io/output_files.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "harness/io/input_file.hpp"
#include "harness/io/progress.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace fs = std::filesystem;
namespace {

// As the kernel's own limit (MAXSYMLINKS): a longer chain is a loop or a mistake.
constexpr int kMaxSymlinkHops = 40;

std::string error_text(int error) { return std::strerror(error); }

// faccessat with the effective IDs: whether this process may write (and, for a directory, enter) `path`.
// 0 when it may, else the errno that says why not (EACCES, EROFS).
int access_error(const fs::path& path, int mode) {
  return ::faccessat(AT_FDCWD, path.c_str(), mode, AT_EACCESS) == 0 ? 0 : errno;
}

fs::path directory_of(const fs::path& file) {
  const fs::path parent = file.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// Follows the symbolic links of `path`, hop by hop (a relative link from the link's own directory), to the
// name that is finally written: an existing file, or the missing name a dangling link points at.
fs::path resolve_links(const std::string& prefix, const std::string& path) {
  fs::path current = path;
  for (int hops = 0;; ++hops) {
    struct stat status {};
    if (::lstat(current.c_str(), &status) != 0 || !S_ISLNK(status.st_mode)) return current;
    if (hops == kMaxSymlinkHops) throw UsageError(prefix + "too many levels of symbolic links");
    std::error_code error;
    const fs::path link = fs::read_symlink(current, error);
    if (error) {
      throw UsageError(prefix + fmt::format("cannot read the symbolic link {} ({})", current.string(), error.message()));
    }
    current = link.is_absolute() ? link : current.parent_path() / link;
  }
}

// A new file will be created at `file`: its directory must exist, be a directory, and take new files.
void check_can_create(const std::string& prefix, const std::string& path, const fs::path& file) {
  const fs::path directory = directory_of(file);
  const std::string via = file.string() == path ? "" : fmt::format("is a symbolic link to {}, and ", file.string());
  struct stat status {};
  if (::stat(directory.c_str(), &status) != 0) {
    throw UsageError(prefix + fmt::format("{}the directory {} does not exist", via, directory.string()));
  }
  if (!S_ISDIR(status.st_mode)) {
    throw UsageError(prefix +
                     fmt::format("{}{} is {}, not a directory", via, directory.string(), file_kind(status.st_mode)));
  }
  if (const int error = access_error(directory, W_OK | X_OK)) {
    throw UsageError(prefix +
                     fmt::format("{}cannot create files in {} ({})", via, directory.string(), error_text(error)));
  }
}

// fs::equivalent where both exist; otherwise the paths with every symbolic link resolved.
bool same_file(const OutputTarget& a, const OutputTarget& b) {
  std::error_code error_a, error_b;
  const bool a_exists = fs::exists(a.file, error_a), b_exists = fs::exists(b.file, error_b);
  if (a_exists && b_exists) {
    std::error_code error;
    return fs::equivalent(a.file, b.file, error);
  }
  auto canonical = [](const std::string& file) {  // absolute first: "a.csv" and "./a.csv" must meet
    std::error_code error;
    const fs::path absolute = fs::absolute(file, error).lexically_normal();
    const fs::path resolved = fs::weakly_canonical(absolute, error);
    return error ? absolute : resolved;
  };
  return canonical(a.file) == canonical(b.file);
}

// Every byte of `text` to `fd`, through short writes and EINTR; the error that stopped it otherwise.
std::error_code write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return {errno, std::generic_category()};
    if (n == 0) return std::make_error_code(std::errc::io_error);  // no progress: report it rather than spin
    text.remove_prefix(std::size_t(n));
  }
  return {};
}

// The permission bits a new file gets from open(2): 0666 less the umask. umask(2) can only be read by
// setting it, so it is set back at once (nothing else in faprobe creates files concurrently).
mode_t new_file_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

[[noreturn]] void write_failed(const OutputTarget& target, int error) {
  throw OutputError(fmt::format("{}: write failed: {}", target.name(), error_text(error)));
}

// A character device, opened and written directly: there is nothing to rename onto it.
void write_device(const OutputTarget& target, std::string_view text) {
  // O_NONBLOCK only for the open (a FIFO put there since the check must not block us); writes block.
  const int fd = ::open(target.file.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) write_failed(target, errno);
  struct stat status {};
  int error = ::fstat(fd, &status) != 0 ? errno : S_ISCHR(status.st_mode) ? 0 : EINVAL;
  if (error == 0 && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) error = errno;
  if (error == 0) error = write_all(fd, text).value();
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) write_failed(target, error);
}

// The whole text in a new unique file in the target's directory (so that a rename or a link stays within one
// file system), synced, with the mode the target has (or a new file would get); returns its name. Throws
// OutputError, leaving nothing behind.
std::string write_temporary(const OutputTarget& target, std::string_view text) {
  std::string temporary = target.file + ".partial.XXXXXX";
  int fd = -1;
  {
    const InterruptsHeld held;  // an interrupt from the moment it exists removes it (progress.hpp)
    fd = ::mkostemp(temporary.data(), O_CLOEXEC);
    if (fd >= 0) remove_on_interrupt(temporary);
  }
  if (fd < 0) {
    throw OutputError(fmt::format("{}: write failed: cannot create a temporary file in {} ({})", target.name(),
                                  directory_of(target.file).string(), error_text(errno)));
  }
  // mkostemp creates 0600; give the file the mode the target has (or a new file would get).
  struct stat existing {};
  const mode_t mode = ::stat(target.file.c_str(), &existing) == 0 && S_ISREG(existing.st_mode)
                          ? existing.st_mode & 07777
                          : new_file_mode();
  int error = ::fchmod(fd, mode) != 0 ? errno : 0;
  if (error == 0) error = write_all(fd, text).value();
  if (error == 0 && ::fsync(fd) != 0) error = errno;  // a deferred write error (ENOSPC, EIO) shows here
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    ::unlink(temporary.c_str());
    remove_on_interrupt("");
    write_failed(target, error);
  }
  return temporary;
}

// A regular file, replaced whole: the new text goes to a temporary file, which is renamed onto the target.
void replace_file(const OutputTarget& target, std::string_view text) {
  const std::string temporary = write_temporary(target, text);
  const int error = ::rename(temporary.c_str(), target.file.c_str()) == 0 ? 0 : errno;
  if (error != 0) ::unlink(temporary.c_str());
  remove_on_interrupt("");  // (an interrupt before this finds the name gone: renamed or removed)
  if (error != 0) write_failed(target, error);
}

}  // namespace

void write_new_document(const OutputTarget& target, std::string_view text) {
  if (target.kind != OutputKind::regular_file) {
    write_document(target, text);
    return;
  }
  const std::string temporary = write_temporary(target, text);
  // link(2) gives the whole file the target's name only where there is none (EEXIST otherwise): never a
  // replacement, never a moment with half a file under the name. A file system without hard links: the name
  // is claimed by an exclusive create, then the whole file renamed onto that claim.
  int error = ::link(temporary.c_str(), target.file.c_str()) == 0 ? 0 : errno;
  if (error == EPERM || error == EOPNOTSUPP || error == ENOSYS || error == EMLINK) {
    const int claim = ::open(target.file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    error = claim < 0 ? errno : 0;
    if (claim >= 0) ::close(claim);
    if (error == 0 && ::rename(temporary.c_str(), target.file.c_str()) != 0) error = errno;
  }
  ::unlink(temporary.c_str());  // after a link, the target's name keeps the file
  remove_on_interrupt("");
  if (error == EEXIST) {
    throw UsageError(fmt::format("{}: was created by another process while this one ran; it is left as it is and "
                                 "this result was not written (give a new file)",
                                 target.name()));
  }
  if (error != 0) write_failed(target, error);
}

OutputTarget check_output(std::string_view flag, const std::string& path, OutputUse use) {
  OutputTarget target{std::string(flag), path, OutputKind::standard_output, "-"};
  if (path == "-") return target;
  const std::string prefix = fmt::format("{} {}: ", flag, path);
  const std::string allowed = use == OutputUse::document
                                  ? "(allowed: a regular file, a character device such as /dev/null, or - for stdout)"
                                  : "(allowed: a regular file to append to, a character device such as /dev/null, or "
                                    "- for stdout)";
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    // ENOTDIR: a part of the path is not a directory, which check_can_create says.
    if (errno != ENOENT && errno != ENOTDIR) {
      throw UsageError(prefix + fmt::format("cannot look it up ({})", error_text(errno)));
    }
    // A new file, or a dangling symbolic link: its final target is created.
    target.kind = OutputKind::regular_file;
    target.file = resolve_links(prefix, path).string();
    check_can_create(prefix, path, target.file);
    return target;
  }
  if (S_ISCHR(status.st_mode)) {
    target.kind = OutputKind::character_device;
    target.file = path;
    if (const int error = access_error(path, W_OK)) {
      throw UsageError(prefix + fmt::format("the device is not writable ({})", error_text(error)));
    }
    return target;
  }
  if (!S_ISREG(status.st_mode)) {
    throw UsageError(prefix + fmt::format("is {}, not a regular file {}", file_kind(status.st_mode), allowed));
  }
  target.kind = OutputKind::regular_file;
  target.file = resolve_links(prefix, path).string();
  // The name the links lead to must be the file stat found (not so for /proc's links to deleted files).
  struct stat resolved {};
  if (::stat(target.file.c_str(), &resolved) != 0 || resolved.st_dev != status.st_dev ||
      resolved.st_ino != status.st_ino) {
    throw UsageError(prefix + "its symbolic links do not lead to a file name that can be replaced");
  }
  const std::string subject = target.file == path ? "the file" : fmt::format("its target {}", target.file);
  if (const int error = access_error(target.file, W_OK)) {
    throw UsageError(prefix + fmt::format("{} is not writable ({})", subject, error_text(error)));
  }
  if (use == OutputUse::document) {  // replaced by a rename in its directory
    const fs::path directory = directory_of(target.file);
    if (const int error = access_error(directory, W_OK | X_OK)) {
      throw UsageError(prefix + fmt::format("cannot replace {}: its directory {} is not writable ({})", subject,
                                            directory.string(), error_text(error)));
    }
  }
  return target;
}

std::vector<const OutputTarget*> OutputTargets::documents() const {
  std::vector<const OutputTarget*> given;
  for (const auto* target : {&json, &csv, &md})
    if (*target) given.push_back(&**target);
  return given;
}

bool OutputTargets::uses_stdout() const {
  for (const auto* target : {&out, &json, &csv, &md})
    if (*target && (*target)->kind == OutputKind::standard_output) return true;
  return false;
}

OutputTargets check_outputs(const OutputPaths& paths) {
  OutputTargets targets;
  if (!paths.out.empty()) targets.out = check_output("--out", paths.out, OutputUse::log);
  if (!paths.json.empty()) targets.json = check_output("--json", paths.json, OutputUse::document);
  if (!paths.csv.empty()) targets.csv = check_output("--csv", paths.csv, OutputUse::document);
  if (!paths.md.empty()) targets.md = check_output("--md", paths.md, OutputUse::document);
  std::vector<const OutputTarget*> given;
  for (const auto* target : {&targets.out, &targets.json, &targets.csv, &targets.md})
    if (*target) given.push_back(&**target);
  for (std::size_t i = 0; i < given.size(); ++i) {
    for (std::size_t j = i + 1; j < given.size(); ++j) {
      const OutputTarget& a = *given[i];
      const OutputTarget& b = *given[j];
      const bool a_stdout = a.kind == OutputKind::standard_output, b_stdout = b.kind == OutputKind::standard_output;
      if (a_stdout && b_stdout) {
        throw UsageError(fmt::format("{} - and {} -: only one output can go to stdout", a.flag, b.flag));
      }
      if (a_stdout || b_stdout || !same_file(a, b)) continue;
      if (a.flag == "--out") {
        throw UsageError(fmt::format("{} is the same file as {}: writing it would destroy the records; give each "
                                     "output its own file", b.name(), a.name()));
      }
      throw UsageError(fmt::format("{} is the same file as {}; give each output its own file", b.name(), a.name()));
    }
  }
  return targets;
}

void check_save_directory(const std::string& directory, const std::vector<std::string>& file_names) {
  if (directory.empty()) return;
  const std::string prefix = fmt::format("--save {}: ", directory);
  struct stat status {};
  if (::stat(directory.c_str(), &status) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) {
      throw UsageError(prefix + fmt::format("cannot look it up ({})", error_text(errno)));
    }
    // Created with its missing parents: the nearest existing ancestor must take new directories.
    fs::path ancestor = directory;
    for (;;) {
      const fs::path parent = ancestor.parent_path();
      ancestor = parent.empty() ? fs::path(".") : parent;
      if (::stat(ancestor.c_str(), &status) == 0) break;
      if (parent.empty() || parent == parent.parent_path()) {
        throw UsageError(prefix + fmt::format("cannot look up {} ({})", ancestor.string(), error_text(errno)));
      }
    }
    if (!S_ISDIR(status.st_mode)) {
      throw UsageError(prefix + fmt::format("cannot create it: {} is {}, not a directory", ancestor.string(),
                                            file_kind(status.st_mode)));
    }
    if (const int error = access_error(ancestor, W_OK | X_OK)) {
      throw UsageError(prefix + fmt::format("cannot create it in {} ({})", ancestor.string(), error_text(error)));
    }
    return;
  }
  if (!S_ISDIR(status.st_mode)) {
    throw UsageError(prefix + fmt::format("is {}, not a directory", file_kind(status.st_mode)));
  }
  if (const int error = access_error(directory, W_OK | X_OK)) {
    throw UsageError(prefix + fmt::format("the directory is not writable ({})", error_text(error)));
  }
  for (const std::string& name : file_names) {
    const fs::path file = fs::path(directory) / name;
    if (::stat(file.c_str(), &status) != 0) continue;  // absent (or a dangling link): created
    if (!S_ISREG(status.st_mode)) {
      throw UsageError(prefix + fmt::format("{} is {}, not a regular file", file.string(), file_kind(status.st_mode)));
    }
    if (const int error = access_error(file, W_OK)) {
      throw UsageError(prefix + fmt::format("{} is not writable ({})", file.string(), error_text(error)));
    }
  }
}

void write_document(const OutputTarget& target, std::string_view text) {
  switch (target.kind) {
    case OutputKind::standard_output: {
      std::cout.flush();  // whatever went through the stream before stays in order
      if (const std::error_code error = write_all(STDOUT_FILENO, text)) write_failed(target, error.value());
      return;
    }
    case OutputKind::character_device: write_device(target, text); return;
    case OutputKind::regular_file: replace_file(target, text); return;
  }
}

AppendFile::AppendFile(const OutputTarget& target) : target_(target) {
  const std::string prefix = target_.name() + ": ";
  if (target_.kind == OutputKind::standard_output) {
    fd_ = STDOUT_FILENO;
    return;
  }
  // Read-write for a regular file, so that --resume reads it back and cuts a torn line through this same
  // locked descriptor. O_NONBLOCK only for the open: a FIFO put there since the check must not block us.
  const bool regular = target_.kind == OutputKind::regular_file;
  const int flags = (regular ? O_RDWR | O_CREAT : O_WRONLY) | O_APPEND | O_NOCTTY | O_CLOEXEC | O_NONBLOCK;
  fd_ = ::open(target_.file.c_str(), flags, 0666);
  if (fd_ < 0) throw UsageError(prefix + fmt::format("cannot open it for appending ({})", error_text(errno)));
  struct stat status {};
  std::string why;
  if (::fstat(fd_, &status) != 0) {
    why = fmt::format("cannot inspect it ({})", error_text(errno));
  } else if (regular ? !S_ISREG(status.st_mode) : !S_ISCHR(status.st_mode)) {
    why = fmt::format("became {} after it was checked", file_kind(status.st_mode));
  } else if (::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK) != 0) {
    why = fmt::format("cannot open it for appending ({})", error_text(errno));
  } else if (regular && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      ::close(fd_);
      throw UsageError(fmt::format("{} is in use by another faprobe process (locked); wait for it to finish or "
                                   "use another --out", target_.name()));
    }
    // A file system without locks (some network or FUSE ones): the run goes on, unguarded.
    fmt::print(stderr, "faprobe: warning: {}cannot lock it ({}); nothing stops another process appending to it\n",
               prefix, error_text(errno));
  }
  if (!why.empty()) {
    ::close(fd_);
    throw UsageError(prefix + why);
  }
}

AppendFile::~AppendFile() {
  if (fd_ >= 0 && fd_ != STDOUT_FILENO) ::close(fd_);  // closing the descriptor releases the lock
}

std::string AppendFile::read_all(std::uint64_t max_bytes) const {
  const std::string prefix = target_.name() + ": ";
  if (!resumable()) throw UsageError(prefix + "cannot be read back (not a regular file)");
  struct stat status {};
  if (::fstat(fd_, &status) != 0) throw UsageError(prefix + fmt::format("cannot read it back ({})", error_text(errno)));
  if (std::uint64_t(status.st_size) > max_bytes) {
    throw UsageError(prefix + fmt::format("has {} bytes; at most {} are read back for --resume",
                                          std::uint64_t(status.st_size), max_bytes));
  }
  std::string bytes(std::size_t(status.st_size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd_, bytes.data() + done, bytes.size() - done, off_t(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UsageError(prefix + fmt::format("cannot read it back ({})", error_text(errno)));
    if (n == 0) break;  // shorter than fstat said: what is there is what there is
    done += std::size_t(n);
  }
  bytes.resize(done);
  return bytes;
}

void AppendFile::truncate(std::uint64_t size) {
  if (::ftruncate(fd_, off_t(size)) != 0) {
    throw OutputError(fmt::format("{}: cannot cut its torn last line ({})", target_.name(), error_text(errno)));
  }
}

std::error_code AppendFile::append(std::string_view bytes) { return write_all(fd_, bytes); }

}  // namespace faprobe
