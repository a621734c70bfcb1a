#include "io/xml.h"

#include <gtest/gtest.h>

namespace stoke {
namespace {

TEST(Xml, ParsesAnAzureListing) {
  const char* text =
      "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
      "<EnumerationResults ServiceEndpoint=\"http://127.0.0.1/\" ContainerName='c'>"
      "<Prefix>t/</Prefix><Blobs>"
      "<Blob><Name>t/a&amp;b&#x41;&#66;</Name><Properties><Content-Length>12</Content-Length></Properties></Blob>"
      "<!-- comment --><BlobPrefix><Name>t/d/</Name></BlobPrefix>"
      "</Blobs><NextMarker /></EnumerationResults>";
  auto doc = ParseXml(text);
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(doc->name, "EnumerationResults");
  const XmlElement* blobs = doc->Child("Blobs");
  ASSERT_NE(blobs, nullptr);
  ASSERT_EQ(blobs->Children("Blob").size(), 1u);
  EXPECT_EQ(blobs->Children("Blob")[0]->ChildText("Name"), "t/a&bAB");
  EXPECT_EQ(blobs->Children("Blob")[0]->Child("Properties")->ChildText("Content-Length"), "12");
  EXPECT_EQ(blobs->Child("BlobPrefix")->ChildText("Name"), "t/d/");
  EXPECT_EQ(doc->ChildText("NextMarker"), "");
  EXPECT_EQ(doc->ChildText("Missing"), "");
}

TEST(Xml, DecodesCdataAndUtf8References) {
  auto doc = ParseXml("<a><![CDATA[x<y>&z]]>&#233;&lt;</a>");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(doc->text, "x<y>&z\xC3\xA9<");
}

TEST(Xml, RejectsMalformedInput) {
  const char* bad[] = {
      "",
      "   ",
      "text only",
      "<a>",
      "<a></b>",
      "<a><b></a></b>",
      "<a>&unknown;</a>",
      "<a>&#xZZ;</a>",
      "<a>&#0;</a>",
      "<a>&#x110000;</a>",
      "<a>&amp</a>",
      "<a x=1></a>",
      "<a x=\"1></a>",
      "<a></a><b></b>",
      "<a></a>trailing",
      "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>",
      "<a><!DOCTYPE x></a>",
      "<a><!-- unterminated </a>",
      "<a><![CDATA[ unterminated </a>",
      "<?xml version=\"1.0\"",
      "<>",
      "</a>",
      "<a/",
  };
  for (const char* b : bad) {
    auto r = ParseXml(b, "test.xml");
    EXPECT_FALSE(r.ok()) << "accepted: " << b;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << b;
      EXPECT_NE(r.status().message().find("test.xml"), std::string::npos);
    }
  }
}

TEST(Xml, CapsNestingDepth) {
  std::string ok, deep;
  for (int i = 0; i < kXmlMaxDepth; ++i) ok += "<a>";
  for (int i = 0; i < kXmlMaxDepth; ++i) ok += "</a>";
  EXPECT_TRUE(ParseXml(ok).ok());
  for (int i = 0; i < 100000; ++i) deep += "<a>";
  auto r = ParseXml(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nested too deeply"), std::string::npos);
}

TEST(Xml, EscapesText) { EXPECT_EQ(XmlEscape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;"); }

}  // namespace
}  // namespace stoke
