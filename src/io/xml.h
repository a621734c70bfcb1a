// A small XML reader for object-store responses (listings, errors, upload ids). It accepts the
// subset those responses use: a prolog (<?xml ...?>), elements with attributes (attributes are
// skipped), text with the five predefined entities and numeric character references, CDATA and
// comments. DOCTYPE and processing instructions inside the document are rejected (no entity
// expansion of any kind). Input is untrusted: every malformed input yields Corruption, depth is
// capped, and memory stays linear in the input size. Pure functions, thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stoke/status.h"

namespace stoke {

struct XmlElement {
  std::string name;  // including any namespace prefix, e.g. "EnumerationResults"
  std::string text;  // concatenated character data directly inside this element, entities decoded
  std::vector<XmlElement> children;

  // The first child named `name`, or nullptr.
  const XmlElement* Child(std::string_view name) const;
  // The text of the first child named `name`, or "" when there is none.
  const std::string& ChildText(std::string_view name) const;
  // All children named `name`, in document order.
  std::vector<const XmlElement*> Children(std::string_view name) const;
};

// Maximum element nesting accepted by ParseXml.
inline constexpr int kXmlMaxDepth = 64;

// Parses one document and returns its root element. `what` names the source in error messages.
Result<XmlElement> ParseXml(std::string_view text, std::string_view what = "XML document");

// Escapes text for use inside an element (&, <, >, ", ').
std::string XmlEscape(std::string_view text);

}  // namespace stoke
