#include "harness/io/npy.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/io/input_file.hpp"
#include "model/errors.hpp"

namespace faprobe {

std::string shape_text(const std::vector<std::int64_t>& dims) {
  if (dims.size() == 1) return fmt::format("({},)", dims[0]);
  return fmt::format("({})", fmt::join(dims, ", "));
}

std::string shape_text(const HostTensor& t) { return shape_text({t.batch(), t.seq(), t.heads(), t.head_dim()}); }

namespace {

// Data is copied between files and tensors byte for byte, which is right only on a little-endian host
// (every machine faprobe targets: x86-64, AArch64, and NVIDIA GPUs' hosts).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy.cpp assumes a little-endian host");

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kPreambleV1 = 10;  // magic (6) + version (2) + uint16 header length
constexpr std::size_t kPreambleV2 = 12;  // magic (6) + version (2) + uint32 header length
constexpr std::size_t kAlign = 64;       // the spec's alignment of the data (NumPy >= 1.9 writes 64)
// A 4-D header is under 200 bytes; anything past this is not a file we wrote or NumPy would write for
// such an array (NumPy's own reader refuses headers over 10000 bytes by default).
constexpr std::uint32_t kMaxHeaderBytes = 1u << 16;
constexpr int kMaxNesting = 16;  // the header parser's recursion limit
constexpr std::string_view kAllowedDtypes = "allowed: float32 '<f4', float16 '<f2', float64 '<f8'";

// Every read error starts with "--q q.npy: ".
class Source {
 public:
  Source(std::string_view flag, const std::string& path)
      : prefix_(flag.empty() ? fmt::format("{}: ", path) : fmt::format("{} {}: ", flag, path)) {}
  [[noreturn]] void fail(std::string_view reason) const { throw UsageError(prefix_ + std::string(reason)); }

 private:
  std::string prefix_;
};

// Header text quoted in a message: printable ASCII only and short, so the message stays one line.
std::string printable(std::string_view text, std::size_t limit = 40) {
  std::string out;
  for (char ch : text.substr(0, limit)) out += (ch >= 0x20 && ch < 0x7f) ? ch : '?';
  if (text.size() > limit) out += "...";
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// The header: a Python literal. The parser accepts the literals a .npy header can hold (dicts, tuples,
// lists, strings, integers with an optional Python 2 'L' suffix, True/False/None) so that a structured or
// otherwise unsupported array is reported as such rather than as a syntax error.

struct PyValue {
  enum class Kind { string, integer, boolean, none, tuple, list, dict };
  Kind kind = Kind::none;
  std::string text;               // string
  std::int64_t integer = 0;       // integer; boolean as 0/1
  std::vector<PyValue> items;     // tuple, list; dict as key, value, key, value, ...
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const Source& source) : text_(text), source_(source) {}

  PyValue parse_dict() {
    skip_space();
    if (peek() != '{') fail("it does not start with '{'");
    PyValue dict = value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the closing '}'");
    return dict;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    source_.fail(fmt::format("malformed header dict ({}, at byte {} of the header)", what, pos_));
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= text_.size(); }
  void skip_space() {
    while (!at_end() && std::strchr(" \t\n\r\f\v", text_[pos_]) != nullptr) ++pos_;
  }
  void expect(char ch) {
    skip_space();
    if (at_end() || text_[pos_] != ch) fail(fmt::format("expected '{}'", ch));
    ++pos_;
  }

  PyValue value(int depth) {
    if (depth > kMaxNesting) fail("nested too deeply");
    skip_space();
    if (at_end()) fail("unexpected end of header");
    const char ch = text_[pos_];
    if (ch == '{') return sequence(PyValue::Kind::dict, '}', depth);
    if (ch == '(') return sequence(PyValue::Kind::tuple, ')', depth);
    if (ch == '[') return sequence(PyValue::Kind::list, ']', depth);
    if (ch == '\'' || ch == '"') return string();
    if (ch == '-' || ch == '+' || (ch >= '0' && ch <= '9')) return integer();
    return word();
  }

  // dict, tuple or list; a trailing comma is allowed, as in Python. "(x)" without a comma is just x.
  PyValue sequence(PyValue::Kind kind, char close, int depth) {
    PyValue out;
    out.kind = kind;
    ++pos_;  // the opening bracket
    bool saw_comma = false;
    for (;;) {
      skip_space();
      if (peek() == close) break;
      if (kind == PyValue::Kind::dict) {
        PyValue key = value(depth + 1);
        if (key.kind != PyValue::Kind::string) fail("a key is not a string");
        expect(':');
        out.items.push_back(std::move(key));
      }
      out.items.push_back(value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        saw_comma = true;
        continue;
      }
      if (peek() == close) break;
      fail(fmt::format("expected ',' or '{}'", close));
    }
    ++pos_;  // the closing bracket
    if (kind == PyValue::Kind::tuple && out.items.size() == 1 && !saw_comma) return std::move(out.items[0]);
    return out;
  }

  PyValue string() {
    PyValue out;
    out.kind = PyValue::Kind::string;
    const char quote = text_[pos_++];
    for (;;) {
      if (at_end()) fail("unterminated string");
      char ch = text_[pos_++];
      if (ch == quote) break;
      if (ch == '\n') fail("unterminated string");
      if (ch == '\\') {
        if (at_end()) fail("unterminated string");
        ch = text_[pos_++];
      }
      out.text += ch;
    }
    return out;
  }

  PyValue integer() {
    PyValue out;
    out.kind = PyValue::Kind::integer;
    bool negative = false;
    if (text_[pos_] == '-' || text_[pos_] == '+') negative = text_[pos_++] == '-';
    if (!(peek() >= '0' && peek() <= '9')) fail("expected a digit");
    std::uint64_t magnitude = 0;
    constexpr auto kMax = std::uint64_t(std::numeric_limits<std::int64_t>::max());
    while (peek() >= '0' && peek() <= '9') {
      const auto digit = std::uint64_t(text_[pos_++] - '0');
      if (magnitude > (kMax - digit) / 10) fail("integer out of range");
      magnitude = magnitude * 10 + digit;
    }
    if (peek() == 'L' || peek() == 'l') ++pos_;  // Python 2 long, in files written by old NumPy
    out.integer = negative ? -std::int64_t(magnitude) : std::int64_t(magnitude);
    return out;
  }

  PyValue word() {
    const std::size_t start = pos_;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    const std::string_view name = text_.substr(start, pos_ - start);
    PyValue out;
    if (name == "True" || name == "False") {
      out.kind = PyValue::Kind::boolean;
      out.integer = name == "True";
    } else if (name == "None") {
      out.kind = PyValue::Kind::none;
    } else {
      pos_ = start;
      fail(name.empty() ? fmt::format("unexpected character '{}'", printable(text_.substr(pos_, 1)))
                        : fmt::format("unexpected name '{}'", printable(name)));
    }
    return out;
  }

  std::string_view text_;
  const Source& source_;
  std::size_t pos_ = 0;
};

struct ArrayHeader {
  std::string descr;  // one of the reader's descrs
  std::vector<std::int64_t> shape;
  std::uint64_t data_bytes = 0;
};

// What one reader takes: its descrs and their element sizes, its number of dimensions, and the words its
// messages use for them.
struct ArrayKind {
  std::vector<std::pair<std::string_view, std::size_t>> descrs;  // descr -> bytes per element
  std::string_view allowed;                                      // "allowed: float32 '<f4', float16 '<f2'"
  std::size_t dims = 4;
  std::string_view expected;  // "a 4-D array (batch, seq, heads, head_dim)"
};

// Turns the parsed dict into what the reader needs, or says what is not supported.
ArrayHeader interpret_header(const PyValue& dict, const ArrayKind& kind, const Source& source) {
  const PyValue* descr = nullptr;
  const PyValue* fortran_order = nullptr;
  const PyValue* shape = nullptr;
  for (std::size_t i = 0; i + 1 < dict.items.size(); i += 2) {
    const std::string& key = dict.items[i].text;
    const PyValue* slot = &dict.items[i + 1];
    const PyValue** target = key == "descr" ? &descr
                             : key == "fortran_order" ? &fortran_order
                             : key == "shape" ? &shape
                                              : nullptr;
    if (target == nullptr) source.fail(fmt::format("malformed header dict (unexpected key '{}')", printable(key)));
    if (*target != nullptr) source.fail(fmt::format("malformed header dict (duplicate key '{}')", key));
    *target = slot;
  }
  auto require = [&](const PyValue* value, std::string_view name) {
    if (value == nullptr) source.fail(fmt::format("malformed header dict (no '{}' key)", name));
  };
  require(descr, "descr");
  require(fortran_order, "fortran_order");
  require(shape, "shape");

  ArrayHeader header;
  if (descr->kind != PyValue::Kind::string) {
    source.fail(fmt::format("structured dtypes are not supported ({})", kind.allowed));
  }
  std::size_t element_bytes = 0;
  for (const auto& [name, bytes] : kind.descrs) {
    if (descr->text == name) element_bytes = bytes;
  }
  if (element_bytes == 0) {
    source.fail(fmt::format("dtype '{}' is not supported ({})", printable(descr->text), kind.allowed));
  }
  header.descr = descr->text;

  if (fortran_order->kind != PyValue::Kind::boolean) {
    source.fail("malformed header dict ('fortran_order' is not True or False)");
  }
  if (fortran_order->integer != 0) {
    source.fail("fortran_order arrays are not supported (save numpy.ascontiguousarray(a) instead)");
  }

  if (shape->kind != PyValue::Kind::tuple) source.fail("malformed header dict ('shape' is not a tuple)");
  for (const PyValue& dim : shape->items) {
    if (dim.kind != PyValue::Kind::integer) source.fail("malformed header dict ('shape' holds a non-integer)");
    header.shape.push_back(dim.integer);
  }
  const std::string shown = shape_text(header.shape);
  if (header.shape.size() != kind.dims) source.fail(fmt::format("expected {}, got shape {}", kind.expected, shown));
  std::uint64_t bytes = element_bytes;
  // The tensor's element count is an int64 and its byte count a size_t: keep both in range.
  constexpr auto kMaxBytes = std::uint64_t(std::numeric_limits<std::int64_t>::max());
  for (std::int64_t dim : header.shape) {
    if (dim < 0) source.fail(fmt::format("shape {} has a negative dimension", shown));
    if (dim == 0) source.fail(fmt::format("shape {} has a zero dimension (empty arrays are not supported)", shown));
    if (bytes > kMaxBytes / std::uint64_t(dim)) source.fail(fmt::format("shape {} is too large", shown));
    bytes *= std::uint64_t(dim);
  }
  header.data_bytes = bytes;
  return header;
}

std::uint32_t little_endian(const unsigned char* bytes, std::size_t count) {
  std::uint32_t value = 0;
  for (std::size_t i = count; i-- > 0;) value = (value << 8) | bytes[i];
  return value;
}

// The version 1.0 header of an array, padded so that the data starts at a multiple of kAlign.
std::string npy_header(std::string_view descr, const std::vector<std::int64_t>& shape) {
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape_text(shape));
  const std::size_t unpadded = kPreambleV1 + dict.size() + 1;  // + the final '\n'
  dict.append((kAlign - unpadded % kAlign) % kAlign, ' ');
  dict += '\n';
  // A shape of at most 4 dimensions prints in under 100 characters, so version 1.0's uint16 length always
  // suffices.
  const auto length = static_cast<std::uint16_t>(dict.size());
  std::string out(kMagic);
  out += '\x01';  // major version
  out += '\x00';  // minor version
  out += static_cast<char>(length & 0xff);
  out += static_cast<char>(length >> 8);
  return out + dict;
}

std::ofstream open_for_writing(const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  return out;
}

void finish_writing(std::ofstream& out, const std::string& path) {
  out.close();
  if (!out) throw std::runtime_error(fmt::format("error writing {}: {}", path, std::strerror(errno)));
}

// Reads the preamble and header of `in` and checks them against `kind`, and checks that the data that
// follows is exactly what the shape needs, all before the caller allocates anything; `in` is then at the
// first data byte. Both readers go through here, so both get every check.
ArrayHeader read_header(InputFile& in, const ArrayKind& kind, const Source& source) {
  const std::uint64_t file_bytes = in.size();

  // Preamble: magic, version, header length.
  std::array<unsigned char, kPreambleV2> preamble{};
  auto* preamble_chars = reinterpret_cast<char*>(preamble.data());
  if (file_bytes < kPreambleV1 || !in.read(preamble_chars, kPreambleV1) ||
      std::memcmp(preamble.data(), kMagic.data(), kMagic.size()) != 0) {
    source.fail("not a .npy file (bad magic)");
  }
  const int major = preamble[6], minor = preamble[7];
  std::uint64_t preamble_bytes = kPreambleV1;
  std::uint32_t header_bytes = 0;
  if (major == 1 && minor == 0) {
    header_bytes = little_endian(&preamble[8], 2);
  } else if ((major == 2 || major == 3) && minor == 0) {
    preamble_bytes = kPreambleV2;
    if (file_bytes < kPreambleV2 || !in.read(preamble_chars + kPreambleV1, kPreambleV2 - kPreambleV1)) {
      source.fail("file is truncated (in the header)");
    }
    header_bytes = little_endian(&preamble[8], 4);
  } else {
    source.fail(fmt::format("unsupported .npy format version {}.{} (allowed: 1.0, 2.0, 3.0)", major, minor));
  }
  if (header_bytes > kMaxHeaderBytes) {
    source.fail(fmt::format("header length {} is implausible (limit {} bytes)", header_bytes, kMaxHeaderBytes));
  }
  if (file_bytes - preamble_bytes < header_bytes) {
    source.fail(fmt::format("file is truncated (expected a header of {} bytes, found {})", header_bytes,
                            file_bytes - preamble_bytes));
  }
  std::string header_text(header_bytes, '\0');
  if (!in.read(header_text.data(), header_bytes)) source.fail("cannot read the header");

  ArrayHeader header = interpret_header(HeaderParser(header_text, source).parse_dict(), kind, source);

  // Check the data's size before allocating: a garbage shape must not become a huge allocation.
  const std::uint64_t found = file_bytes - preamble_bytes - header_bytes;
  if (found < header.data_bytes) {
    source.fail(fmt::format("file is truncated (expected {} bytes of data, found {})", header.data_bytes, found));
  }
  if (found > header.data_bytes) {
    source.fail(fmt::format("file has {} bytes after the header, but shape {} needs {} (trailing data)", found,
                            shape_text(header.shape), header.data_bytes));
  }
  return header;
}

}  // namespace

void write_npy(const std::string& path, const HostTensor& tensor) {
  write_npy(path, tensor, {tensor.batch(), tensor.seq(), tensor.heads(), tensor.head_dim()});
}

void write_npy(const std::string& path, const HostTensor& tensor, const std::vector<std::int64_t>& shape) {
  std::int64_t elements = 1;
  for (std::int64_t dim : shape) elements *= dim;
  if (shape.size() != 4 || elements != tensor.elements()) {
    throw std::logic_error(fmt::format("write_npy {}: shape {} does not hold the tensor's {} elements", path,
                                       shape_text(shape), tensor.elements()));
  }
  const bool widen = tensor.dtype() == DType::bf16 || tensor.dtype() == DType::fp8_e4m3;
  const std::string header = npy_header(tensor.dtype() == DType::fp16 ? "<f2" : "<f4", shape);

  std::ofstream out = open_for_writing(path);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  const auto count = std::size_t(tensor.elements());
  if (!widen) {
    out.write(tensor.data<char>(), static_cast<std::streamsize>(count * dtype_bytes(tensor.dtype())));
  } else {
    // bf16 -> fp32 and dequantized e4m3 -> fp32 are exact; widen a chunk at a time so that saving never
    // doubles the tensor's memory.
    std::vector<float> chunk(std::min<std::size_t>(count, 1 << 16));
    for (std::size_t done = 0; done < count && out;) {
      const std::size_t n = std::min(chunk.size(), count - done);
      for (std::size_t i = 0; i < n; ++i) chunk[i] = tensor.get(std::int64_t(done + i));
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(n * sizeof(float)));
      done += n;
    }
  }
  finish_writing(out, path);
}

void write_npy_int32(const std::string& path, const Int32Array& array) {
  std::int64_t elements = 1;
  for (std::int64_t dim : array.shape) elements *= dim;
  if (array.shape.empty() || array.shape.size() > 2 || elements != std::int64_t(array.values.size())) {
    throw std::logic_error(fmt::format("write_npy_int32 {}: shape {} does not hold {} values", path,
                                       shape_text(array.shape), array.values.size()));
  }
  const std::string header = npy_header("<i4", array.shape);
  std::ofstream out = open_for_writing(path);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(array.values.data()),
            static_cast<std::streamsize>(array.values.size() * sizeof(std::int32_t)));
  finish_writing(out, path);
}

HostTensor read_npy(const std::string& path, std::string_view flag, bool* narrowed_from_float64) {
  static const ArrayKind kTensor{{{"<f4", 4}, {"<f2", 2}, {"<f8", 8}}, kAllowedDtypes, 4,
                                 "a 4-D array (batch, seq, heads, head_dim)"};
  const Source source(flag, path);
  InputFile in(path, flag);  // a regular file, or a UsageError that names the flag
  const ArrayHeader header = read_header(in, kTensor, source);
  const bool float64 = header.descr == "<f8";
  if (narrowed_from_float64 != nullptr) *narrowed_from_float64 = float64;
  const DType dtype = header.descr == "<f2" ? DType::fp16 : DType::fp32;
  HostTensor tensor(dtype, header.shape[0], header.shape[1], header.shape[2], header.shape[3]);
  if (!float64) {
    if (!in.read(tensor.data<char>(), header.data_bytes)) source.fail("read error in the data");
    return tensor;
  }
  // float64, rounded to the nearest float32 a chunk at a time (no second copy of the whole array).
  std::vector<double> chunk(std::size_t(1) << 16);
  float* out = tensor.data<float>();
  for (std::int64_t done = 0, total = tensor.elements(); done < total;) {
    const std::size_t count = std::size_t(std::min<std::int64_t>(std::int64_t(chunk.size()), total - done));
    if (!in.read(reinterpret_cast<char*>(chunk.data()), count * sizeof(double))) source.fail("read error in the data");
    for (std::size_t i = 0; i < count; ++i) out[done + std::int64_t(i)] = float(chunk[i]);
    done += std::int64_t(count);
  }
  return tensor;
}

Int32Array read_npy_int32(const std::string& path, std::string_view flag, std::size_t dims, std::string_view axes) {
  if (dims != 1 && dims != 2) throw std::logic_error("read_npy_int32 reads 1-D and 2-D arrays only");
  // flash-attention's cache_seqlens and block_table are torch.int32; NumPy's default integer is int64, so
  // '<i8' is the likely mistake and the message says how to convert.
  const std::string expected = fmt::format("a {}-D array {}", dims, axes);
  const ArrayKind kind{{{"<i4", 4}}, "allowed: int32 '<i4'; save a.astype(numpy.int32)", dims, expected};
  const Source source(flag, path);
  InputFile in(path, flag);
  const ArrayHeader header = read_header(in, kind, source);
  Int32Array array;
  array.shape = header.shape;
  array.values.resize(std::size_t(header.data_bytes / sizeof(std::int32_t)));
  if (!in.read(reinterpret_cast<char*>(array.values.data()), header.data_bytes)) source.fail("read error in the data");
  return array;
}

void check_attention_shapes(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& o) {
  const std::string qs = shape_text(q), ks = shape_text(k), vs = shape_text(v), os = shape_text(o);
  if (ks != vs) {
    throw UsageError(
        fmt::format("--k {} and --v {} must have the same shape (batch, seq_k, kv_heads, head_dim)", ks, vs));
  }
  if (os != qs) {
    throw UsageError(fmt::format("--o {} must have the shape of --q {} (batch, seq_q, heads, head_dim)", os, qs));
  }
  auto mismatch = [&](std::string_view axis, std::int64_t in_q, std::int64_t in_k) {
    throw UsageError(fmt::format("--q {} and --k/--v {} disagree in {} ({} vs {})", qs, ks, axis, in_q, in_k));
  };
  if (q.batch() != k.batch()) mismatch("batch", q.batch(), k.batch());
  if (q.head_dim() != k.head_dim()) mismatch("head_dim", q.head_dim(), k.head_dim());
  if (k.heads() == 0 || q.heads() % k.heads() != 0) {
    throw UsageError(fmt::format("--q {} has {} heads, not a multiple of the {} kv heads of --k/--v {}", qs,
                                 q.heads(), k.heads(), ks));
  }
}

}  // namespace faprobe
