#include "io/xml.h"

#include <fmt/format.h>

#include <cctype>

namespace stoke {

const XmlElement* XmlElement::Child(std::string_view n) const {
  for (const auto& c : children) {
    if (c.name == n) return &c;
  }
  return nullptr;
}

const std::string& XmlElement::ChildText(std::string_view n) const {
  static const std::string kEmpty;
  const XmlElement* c = Child(n);
  return c ? c->text : kEmpty;
}

std::vector<const XmlElement*> XmlElement::Children(std::string_view n) const {
  std::vector<const XmlElement*> out;
  for (const auto& c : children) {
    if (c.name == n) out.push_back(&c);
  }
  return out;
}

namespace {

bool IsNameChar(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || c == '-' || c == '.' || c == ':' || u >= 0x80;
}
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class Parser {
 public:
  Parser(std::string_view s, std::string_view what) : s_(s), what_(what) {}

  Result<XmlElement> Document() {
    SkipMisc(/*allow_prolog=*/true);
    if (!error_.ok()) return error_;
    if (pos_ >= s_.size() || s_[pos_] != '<') return Fail("expected the root element");
    XmlElement root;
    STOKE_RETURN_IF_ERROR(Element(root, 1));
    SkipMisc(/*allow_prolog=*/false);
    if (!error_.ok()) return error_;
    if (pos_ != s_.size()) return Fail("unexpected content after the root element");
    return root;
  }

 private:
  Status Fail(std::string_view why) {
    return Status::Corruption(fmt::format("{}: {} at byte {}", what_, why, pos_));
  }

  bool StartsWith(std::string_view p) const { return s_.substr(pos_, p.size()) == p; }

  // Skips whitespace, comments and (before the root) the XML declaration.
  void SkipMisc(bool allow_prolog) {
    while (pos_ < s_.size()) {
      if (IsSpace(s_[pos_])) {
        ++pos_;
      } else if (StartsWith("<!--")) {
        size_t end = s_.find("-->", pos_ + 4);
        if (end == std::string_view::npos) {
          error_ = Fail("unterminated comment");
          return;
        }
        pos_ = end + 3;
      } else if (allow_prolog && StartsWith("<?")) {
        size_t end = s_.find("?>", pos_ + 2);
        if (end == std::string_view::npos) {
          error_ = Fail("unterminated declaration");
          return;
        }
        pos_ = end + 2;
      } else {
        return;
      }
    }
  }

  Result<std::string> Name() {
    size_t start = pos_;
    while (pos_ < s_.size() && IsNameChar(s_[pos_])) ++pos_;
    if (pos_ == start) return Fail("expected a name");
    return std::string(s_.substr(start, pos_ - start));
  }

  // Decodes character data up to the next '<' into `out`.
  Status Text(std::string& out) {
    while (pos_ < s_.size() && s_[pos_] != '<') {
      char c = s_[pos_];
      if (c != '&') {
        out.push_back(c);
        ++pos_;
        continue;
      }
      size_t end = s_.find(';', pos_);
      if (end == std::string_view::npos || end - pos_ > 12) return Fail("unterminated entity reference");
      std::string_view ent = s_.substr(pos_ + 1, end - pos_ - 1);
      if (ent == "lt") out.push_back('<');
      else if (ent == "gt") out.push_back('>');
      else if (ent == "amp") out.push_back('&');
      else if (ent == "quot") out.push_back('"');
      else if (ent == "apos") out.push_back('\'');
      else if (ent.size() >= 2 && ent[0] == '#') {
        bool hex = ent[1] == 'x' || ent[1] == 'X';
        std::string_view digits = ent.substr(hex ? 2 : 1);
        if (digits.empty()) return Fail("empty character reference");
        uint32_t cp = 0;
        for (char d : digits) {
          int v;
          if (d >= '0' && d <= '9') v = d - '0';
          else if (hex && d >= 'a' && d <= 'f') v = d - 'a' + 10;
          else if (hex && d >= 'A' && d <= 'F') v = d - 'A' + 10;
          else return Fail("bad digit in character reference");
          cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(v);
          if (cp > 0x10FFFF) return Fail("character reference out of range");
        }
        if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) return Fail("invalid character reference");
        AppendUtf8(out, cp);
      } else {
        return Fail("unknown entity");
      }
      pos_ = end + 1;
    }
    return Status::OK();
  }

  Status SkipAttributes(bool& self_closing) {
    while (true) {
      while (pos_ < s_.size() && IsSpace(s_[pos_])) ++pos_;
      if (pos_ >= s_.size()) return Fail("unterminated start tag");
      if (s_[pos_] == '>') {
        ++pos_;
        self_closing = false;
        return Status::OK();
      }
      if (StartsWith("/>")) {
        pos_ += 2;
        self_closing = true;
        return Status::OK();
      }
      STOKE_RETURN_IF_ERROR(Name());
      while (pos_ < s_.size() && IsSpace(s_[pos_])) ++pos_;
      if (pos_ >= s_.size() || s_[pos_] != '=') return Fail("expected '=' in attribute");
      ++pos_;
      while (pos_ < s_.size() && IsSpace(s_[pos_])) ++pos_;
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) return Fail("expected a quoted attribute value");
      size_t end = s_.find(s_[pos_], pos_ + 1);
      if (end == std::string_view::npos) return Fail("unterminated attribute value");
      if (s_.substr(pos_ + 1, end - pos_ - 1).find('<') != std::string_view::npos) {
        return Fail("'<' in attribute value");
      }
      pos_ = end + 1;
    }
  }

  // REQUIRES: s_[pos_] == '<'.
  Status Element(XmlElement& e, int depth) {
    if (depth > kXmlMaxDepth) return Fail("elements nested too deeply");
    ++pos_;
    STOKE_ASSIGN_OR_RETURN(e.name, Name());
    bool self_closing = false;
    STOKE_RETURN_IF_ERROR(SkipAttributes(self_closing));
    if (self_closing) return Status::OK();
    while (true) {
      STOKE_RETURN_IF_ERROR(Text(e.text));
      if (pos_ >= s_.size()) return Fail(fmt::format("unterminated element <{}>", e.name));
      if (StartsWith("</")) {
        pos_ += 2;
        STOKE_ASSIGN_OR_RETURN(std::string end_name, Name());
        if (end_name != e.name) return Fail(fmt::format("end tag </{}> does not match <{}>", end_name, e.name));
        while (pos_ < s_.size() && IsSpace(s_[pos_])) ++pos_;
        if (pos_ >= s_.size() || s_[pos_] != '>') return Fail("expected '>' after end tag name");
        ++pos_;
        return Status::OK();
      }
      if (StartsWith("<!--")) {
        size_t end = s_.find("-->", pos_ + 4);
        if (end == std::string_view::npos) return Fail("unterminated comment");
        pos_ = end + 3;
        continue;
      }
      if (StartsWith("<![CDATA[")) {
        size_t end = s_.find("]]>", pos_ + 9);
        if (end == std::string_view::npos) return Fail("unterminated CDATA section");
        e.text.append(s_.substr(pos_ + 9, end - pos_ - 9));
        pos_ = end + 3;
        continue;
      }
      if (StartsWith("<!") || StartsWith("<?")) return Fail("declarations and processing instructions are not supported");
      e.children.emplace_back();
      STOKE_RETURN_IF_ERROR(Element(e.children.back(), depth + 1));
    }
  }

  std::string_view s_;
  std::string_view what_;
  size_t pos_ = 0;
  Status error_;
};

}  // namespace

Result<XmlElement> ParseXml(std::string_view text, std::string_view what) {
  // A UTF-8 byte order mark may precede the prolog (Azure sends one).
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  return Parser(text, what).Document();
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace stoke
