// .npz writing and reading: zip (stored or deflated) of .npy version 1.0.
#include "model/npz.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "zlib.h"

namespace downpour::model {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndOfCentral = 0x06054b50;

void Put16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v & 0xff));
  out->push_back(static_cast<char>(v >> 8));
}

void Put32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint32_t Get32(absl::string_view s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

uint16_t Get16(absl::string_view s, size_t at) {
  return static_cast<uint16_t>(static_cast<unsigned char>(s[at]) |
                               (static_cast<unsigned char>(s[at + 1]) << 8));
}

// The .npy bytes of one array: magic, version 1.0, header padded to 64.
std::string NpyBytes(const NpyArray& a) {
  std::string dict;
  if (a.is_string) {
    dict = absl::StrCat("{'descr': '<U", std::max<size_t>(a.text.size(), 1),
                        "', 'fortran_order': False, 'shape': (), }");
  } else {
    std::string shape = absl::StrJoin(a.shape, ", ");
    if (a.shape.size() == 1) shape += ",";
    dict = absl::StrCat("{'descr': '", a.is_uint64 ? "<u8" : "<f4",
                        "', 'fortran_order': False, 'shape': (", shape, "), }");
  }
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  Put16(&out, static_cast<uint16_t>(dict.size()));
  out += dict;
  if (a.is_string) {
    // UTF-32LE code points; an empty string is one NUL code point.
    if (a.text.empty()) Put32(&out, 0);
    for (unsigned char c : a.text) Put32(&out, c);
  } else if (a.is_uint64) {
    const size_t bytes = a.uint64.size() * sizeof(uint64_t);
    const size_t at = out.size();
    out.resize(at + bytes);
    std::memcpy(&out[at], a.uint64.data(), bytes);  // little-endian hosts
  } else {
    const size_t bytes = a.values.size() * sizeof(float);
    const size_t at = out.size();
    out.resize(at + bytes);
    std::memcpy(&out[at], a.values.data(), bytes);  // little-endian hosts
  }
  return out;
}

absl::Status Corrupt(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": not a NumPy .npz this reader understands: ", what));
}

// Parses one .npy: float32 or unicode-string arrays.
// `bytes` is viewed, not copied: the values are copied once, into the array.
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes,
                                  const std::string& where) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) {
    return Corrupt(where, "no .npy magic");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = Get16(bytes, 8);
    start = 10;
  } else {
    header_len = Get32(bytes, 8);
    start = 12;
  }
  if (start + header_len > bytes.size())
    return Corrupt(where, "truncated header");
  const std::string dict(bytes.substr(start, header_len));
  NpyArray a;
  if (dict.find("'fortran_order': True") != std::string::npos) {
    return Corrupt(where, "Fortran order");
  }
  const size_t shape_at = dict.find("'shape': (");
  if (shape_at == std::string::npos) return Corrupt(where, "no shape");
  const size_t shape_end = dict.find(')', shape_at);
  for (absl::string_view part : absl::StrSplit(
           dict.substr(shape_at + 10, shape_end - shape_at - 10), ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d < 0)
      return Corrupt(where, "bad shape");
    a.shape.push_back(d);
  }
  const absl::string_view data = bytes.substr(start + header_len);
  const bool is_f4 = dict.find("'descr': '<f4'") != std::string::npos;
  const bool is_u8 = dict.find("'descr': '<u8'") != std::string::npos;
  if (is_f4 || is_u8) {
    const size_t width = is_f4 ? sizeof(float) : sizeof(uint64_t);
    // The element count and its bytes, without overflow for any shape.
    size_t count = 1, expected = 0;
    bool overflow = false;
    for (int64_t d : a.shape) {
      overflow |= __builtin_mul_overflow(count, static_cast<size_t>(d), &count);
    }
    overflow |= __builtin_mul_overflow(count, width, &expected);
    if (overflow || data.size() != expected) {
      return Corrupt(where, absl::StrCat("expected ",
                                         overflow ? "more than 2^64 bytes of"
                                                  : absl::StrCat(count),
                                         is_f4 ? " floats" : " uint64s",
                                         ", got ", data.size(), " bytes"));
    }
    if (is_f4) {
      a.values.resize(count);
      std::memcpy(a.values.data(), data.data(), data.size());
    } else {
      a.is_uint64 = true;
      a.uint64.resize(count);
      std::memcpy(a.uint64.data(), data.data(), data.size());
    }
    return a;
  }
  if (dict.find("'descr': '<U") != std::string::npos && a.shape.empty()) {
    a.is_string = true;
    for (size_t i = 0; i + 4 <= data.size(); i += 4) {
      const uint32_t c = Get32(data, i);
      if (c == 0) break;
      if (c > 127) return Corrupt(where, "non-ASCII string");
      a.text.push_back(static_cast<char>(c));
    }
    return a;
  }
  return Corrupt(where, absl::StrCat("unsupported array type in ", dict));
}

absl::StatusOr<std::string> Inflate(absl::string_view in, size_t out_size,
                                    const std::string& where) {
  std::string out(out_size, '\0');
  z_stream z = {};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return Corrupt(where, "zlib init");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_FINISH);
  inflateEnd(&z);
  if (rc != Z_STREAM_END || z.total_out != out_size) {
    return Corrupt(where, "corrupt deflate data");
  }
  return out;
}

}  // namespace

void NpzWriter::AddFloat32(const std::string& name, std::vector<int64_t> shape,
                           std::vector<float> values) {
  NpyArray a;
  a.name = name;
  a.shape = std::move(shape);
  a.values = std::move(values);
  arrays_.push_back(std::move(a));
}

void NpzWriter::AddUint64(const std::string& name, std::vector<int64_t> shape,
                          std::vector<uint64_t> values) {
  NpyArray a;
  a.name = name;
  a.shape = std::move(shape);
  a.uint64 = std::move(values);
  a.is_uint64 = true;
  arrays_.push_back(std::move(a));
}

void NpzWriter::AddString(const std::string& name, const std::string& text) {
  NpyArray a;
  a.name = name;
  a.text = text;
  a.is_string = true;
  arrays_.push_back(std::move(a));
}

absl::Status NpzWriter::WriteTo(const std::string& path) const {
  std::string zip, central;
  uint16_t entries = 0;
  for (const NpyArray& a : arrays_) {
    const std::string npy = NpyBytes(a);
    const std::string name = a.name + ".npy";
    if (npy.size() >= 0xffffffffu || zip.size() >= 0xffffffffu) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": array ", a.name, " makes the file larger than 4 GiB"));
    }
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(npy.data()),
              static_cast<uInt>(npy.size())));
    const uint32_t offset = static_cast<uint32_t>(zip.size());
    Put32(&zip, kLocalHeader);
    Put16(&zip, 20);    // version needed
    Put16(&zip, 0);     // flags
    Put16(&zip, 0);     // stored
    Put16(&zip, 0);     // time
    Put16(&zip, 0x21);  // date 1980-01-01
    Put32(&zip, crc);
    Put32(&zip, static_cast<uint32_t>(npy.size()));
    Put32(&zip, static_cast<uint32_t>(npy.size()));
    Put16(&zip, static_cast<uint16_t>(name.size()));
    Put16(&zip, 0);
    zip += name;
    zip += npy;
    Put32(&central, kCentralHeader);
    Put16(&central, 20);  // made by
    Put16(&central, 20);  // needed
    Put16(&central, 0);
    Put16(&central, 0);
    Put16(&central, 0);
    Put16(&central, 0x21);
    Put32(&central, crc);
    Put32(&central, static_cast<uint32_t>(npy.size()));
    Put32(&central, static_cast<uint32_t>(npy.size()));
    Put16(&central, static_cast<uint16_t>(name.size()));
    Put16(&central, 0);  // extra
    Put16(&central, 0);  // comment
    Put16(&central, 0);  // disk
    Put16(&central, 0);  // internal attributes
    Put32(&central, 0);  // external attributes
    Put32(&central, offset);
    central += name;
    ++entries;
  }
  const uint32_t central_at = static_cast<uint32_t>(zip.size());
  zip += central;
  Put32(&zip, kEndOfCentral);
  Put16(&zip, 0);
  Put16(&zip, 0);
  Put16(&zip, entries);
  Put16(&zip, entries);
  Put32(&zip, static_cast<uint32_t>(central.size()));
  Put32(&zip, central_at);
  Put16(&zip, 0);
  return WriteFileAtomically(path, zip);
}

absl::StatusOr<std::vector<NpyArray>> ReadNpz(const std::string& path) {
  absl::StatusOr<std::string> file = ReadFile(path);
  if (!file.ok()) return file.status();
  const absl::string_view s = *file;
  std::vector<NpyArray> out;
  size_t at = 0;
  while (at + 30 <= s.size() && Get32(s, at) == kLocalHeader) {
    const uint16_t flags = Get16(s, at + 6);
    const uint16_t method = Get16(s, at + 8);
    const uint32_t compressed = Get32(s, at + 18);
    const uint32_t size = Get32(s, at + 22);
    const uint16_t name_len = Get16(s, at + 26);
    const uint16_t extra_len = Get16(s, at + 28);
    const size_t data_at = at + 30 + name_len + extra_len;
    if (data_at + compressed > s.size())
      return Corrupt(path, "truncated entry");
    std::string name(s.substr(at + 30, name_len));
    const std::string where = absl::StrCat(path, " (", name, ")");
    if ((flags & 0x8) != 0 || compressed == 0xffffffffu) {
      return Corrupt(where,
                     "streamed or zip64 entry; re-save with numpy.savez");
    }
    absl::string_view npy;  // into the file, or into `inflated`
    std::string inflated;
    if (method == 0) {
      npy = s.substr(data_at, compressed);
    } else if (method == 8) {
      absl::StatusOr<std::string> data =
          Inflate(s.substr(data_at, compressed), size, where);
      if (!data.ok()) return data.status();
      inflated = *std::move(data);
      npy = inflated;
    } else {
      return Corrupt(where, absl::StrCat("compression method ", method));
    }
    absl::StatusOr<NpyArray> array = ParseNpy(npy, where);
    if (!array.ok()) return array.status();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) {
      name.resize(name.size() - 4);
    }
    array->name = name;
    out.push_back(*std::move(array));
    at = data_at + compressed;
  }
  if (out.empty()) return Corrupt(path, "no arrays (not a zip file?)");
  return out;
}

}  // namespace downpour::model
