// libFuzzer target: ParseXml on arbitrary bytes returns a Status or a tree; it never crashes,
// recurses past kXmlMaxDepth, or reads out of bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/xml.h"

namespace {

// Counts elements; a parsed tree can hold at most one element per 3 input bytes ("<a/>").
size_t CountElements(const stoke::XmlElement& e, int depth) {
  if (depth > stoke::kXmlMaxDepth) __builtin_trap();
  size_t n = 1;
  for (const auto& c : e.children) n += CountElements(c, depth + 1);
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 20)) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto doc = stoke::ParseXml(text, "fuzz.xml");
  if (doc.ok()) {
    if (CountElements(*doc, 1) > size / 3 + 1) __builtin_trap();
    (void)doc->ChildText("Name");
  }
  return 0;
}
