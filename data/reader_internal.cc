// Number parsing, positions and binary checks shared by the readers.
#include "data/reader_internal.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace downpour::data::internal {
namespace {

constexpr size_t kUtf8CheckBytes = 64 << 10;
constexpr size_t kQuoteBytes = 40;

// The length of the valid UTF-8 sequence at text[i], or 0 if it is not one.
size_t Utf8SequenceLength(absl::string_view text, size_t i) {
  const auto byte = [&](size_t k) {
    return static_cast<unsigned char>(text[k]);
  };
  const unsigned char c = byte(i);
  if (c < 0x80) return c == 0 ? 0 : 1;
  size_t n;
  unsigned char min2 = 0x80, max2 = 0xbf;  // bounds of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) min2 = 0xa0;  // overlong
    if (c == 0xed) max2 = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) min2 = 0x90;  // overlong
    if (c == 0xf4) max2 = 0x8f;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < min2 || byte(i + 1) > max2) return 0;
  for (size_t k = 2; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

NumberKind ParseFloat(absl::string_view token, float* value) {
  const char* begin = token.data();
  const char* end = begin + token.size();
  // from_chars takes no '+'; a sign must be followed by the number itself.
  if (begin != end && *begin == '+') {
    ++begin;
    if (begin != end && *begin == '-') return NumberKind::kNotNumber;
  }
  if (begin == end) return NumberKind::kNotNumber;
  float v;
  const auto [ptr, error] = std::from_chars(begin, end, v);
  if (ptr != end) return NumberKind::kNotNumber;
  if (error == std::errc::result_out_of_range) {
    // Too small rounds to 0 (a feature of 1e-50 is fine); too large is Inf.
    double d;
    const auto [dptr, derror] = std::from_chars(begin, end, d);
    if (derror == std::errc() && dptr == end && std::fabs(d) < 1.0) {
      *value = static_cast<float>(d);
      return NumberKind::kOk;
    }
    return NumberKind::kInf;
  }
  if (error != std::errc()) return NumberKind::kNotNumber;
  if (std::isnan(v)) return NumberKind::kNaN;
  if (std::isinf(v)) return NumberKind::kInf;
  *value = v;
  return NumberKind::kOk;
}

bool IsMissingMarker(absl::string_view token) {
  switch (token.size()) {
    case 0:
      return true;
    case 1:
      return token[0] == '?';
    case 2:
      return absl::EqualsIgnoreCase(token, "na");
    case 3:
      return absl::EqualsIgnoreCase(token, "nan") ||
             absl::EqualsIgnoreCase(token, "n/a");
    default:
      return false;
  }
}

std::string Quote(absl::string_view token) {
  std::string out = "'";
  const size_t n = std::min(token.size(), kQuoteBytes);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c < 0x20 || c >= 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (token.size() > n) out += "...";
  out += "'";
  return out;
}

absl::Status ErrorAt(absl::string_view name, int64_t line, int64_t column,
                     absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(name, ":", line, ":", column, ": ", message));
}

void LineAndColumn(absl::string_view text, size_t offset, int64_t* line,
                   int64_t* column) {
  offset = std::min(offset, text.size());
  *line = 1 + std::count(text.begin(), text.begin() + offset, '\n');
  const size_t start = text.substr(0, offset).rfind('\n');
  *column = static_cast<int64_t>(
      start == absl::string_view::npos ? offset + 1 : offset - start);
}

absl::Status ErrorAtOffset(absl::string_view text, absl::string_view name,
                           size_t offset, absl::string_view message) {
  int64_t line, column;
  LineAndColumn(text, offset, &line, &column);
  return ErrorAt(name, line, column, message);
}

size_t FindBinaryByte(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) return i;
    i += n;
  }
  return absl::string_view::npos;
}

absl::Status CheckLooksLikeText(absl::string_view text, absl::string_view name,
                                absl::string_view format) {
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f &&
      static_cast<unsigned char>(text[1]) == 0x8b) {
    return ErrorAt(name, 1, 1,
                   absl::StrCat("the data is gzip-compressed; read the file "
                                "with ReadCsv/ReadLibsvm (which gunzip it) or "
                                "gunzip it first, not as ",
                                format, " text"));
  }
  size_t bad = absl::string_view::npos;
  if (const void* nul = std::memchr(text.data(), '\0', text.size())) {
    bad = static_cast<const char*>(nul) - text.data();
  }
  const size_t utf8 = FindBinaryByte(
      text.substr(0, std::min({text.size(), kUtf8CheckBytes, bad})));
  bad = std::min(bad, utf8);
  if (bad == absl::string_view::npos) return absl::OkStatus();
  return ErrorAtOffset(
      text, name, bad,
      absl::StrFormat("the file looks binary (byte 0x%02x is not text); is it "
                      "compressed with something other than gzip, or not a "
                      "%s file?",
                      static_cast<unsigned char>(text[bad]), format));
}

absl::Status CheckTokenIsText(absl::string_view text, absl::string_view name,
                              size_t offset, absl::string_view token,
                              absl::string_view format) {
  const size_t bad = FindBinaryByte(token);
  if (bad == absl::string_view::npos) return absl::OkStatus();
  return ErrorAtOffset(
      text, name, offset + bad,
      absl::StrFormat("the file looks binary (byte 0x%02x is not text in %s); "
                      "is it compressed with something other than gzip, or "
                      "not a %s file?",
                      static_cast<unsigned char>(token[bad]), Quote(token),
                      format));
}

absl::string_view CutLine(absl::string_view text, size_t* next_offset) {
  const char* begin = text.data() + *next_offset;
  const size_t left = text.size() - *next_offset;
  const void* nl = std::memchr(begin, '\n', left);
  const size_t length =
      nl == nullptr ? left : static_cast<const char*>(nl) - begin;
  *next_offset += length + 1;
  absl::string_view line(begin, length);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

absl::Status CheckLineLength(absl::string_view line, absl::string_view name,
                             int64_t line_number, int64_t max_line_bytes,
                             absl::string_view format) {
  if (static_cast<int64_t>(line.size()) <= max_line_bytes) {
    return absl::OkStatus();
  }
  return ErrorAt(name, line_number, max_line_bytes + 1,
                 absl::StrCat("line is longer than ", max_line_bytes,
                              " bytes (max_line_bytes); is this a ", format,
                              " file with one example per line?"));
}

absl::string_view StripByteOrderMark(absl::string_view text, size_t* skipped) {
  *skipped = 0;
  if (text.substr(0, 3) == "\xef\xbb\xbf") {
    *skipped = 3;
    text.remove_prefix(3);
  }
  return text;
}

}  // namespace downpour::data::internal
