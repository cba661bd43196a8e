// How text and HTML reports shorten C++ names (reports/text_format.cpp): in
// tables and prose, never inside a rule a user pastes.
#include "rule_match.h"
#include "text_format.h"

#include <catch2/catch.hpp>

using memlayout::cli::display_name;
using memlayout::cli::fix_with_display_names;
using memlayout::cli::with_display_names;
using memlayout::inspector::segregate_flag;

TEST_CASE("display names drop namespaces and template arguments, keep the site", "[text]") {
  CHECK(display_name("ns::IntLf<ns::Layout>::new_node(long, long) (int_lf.cpp:171)") ==
        "IntLf<...>::new_node(long, long) (int_lf.cpp:171)");
  CHECK(display_name("mlr_new_node") == "mlr_new_node");
  // The space in "(anonymous namespace)" is no return type's.
  CHECK(display_name("(anonymous namespace)::by_ptr(S*, int) (a.cpp:6)") ==
        "(anonymous namespace)::by_ptr(S*, int) (a.cpp:6)");
  CHECK(display_name("Node<5>* mk<5>(long) (s.cpp:3)") == "mk<...>(long) (s.cpp:3)");
}

// A pool's or tag's name is the program's bytes: a newline in it would end
// the table's row, a tab shift its columns.
TEST_CASE("display names show control characters as C escapes", "[text]") {
  CHECK(display_name("rows\nlive") == "rows\\nlive");
  CHECK(display_name("a\tb\rc") == "a\\tb\\rc");
  CHECK(display_name(std::string("x\x01y\x7f", 4)) == "x\\x01y\\x7f");
  CHECK(display_name("caf\xc3\xa9") == "caf\xc3\xa9"); // UTF-8 stays as it is
}

TEST_CASE("a fix's rule keeps the full name the prose shortens", "[text]") {
  // A site in a header without line information: its group's name is the
  // bare function, which is also the rule's function key.
  const std::string name = "std::__detail::_Map_base<long, std::pair<long const, P*>, true>::"
                           "operator[](long const&)";
  const std::string rule = "function=" + name + ",pool=_Map_base.operator__";
  const std::string fix = "segregate " + name + " into its own pool: " + segregate_flag(rule);
  std::string shown = fix_with_display_names(fix, {name});
  CHECK(shown == "segregate _Map_base<...>::operator[](long const&) into its own pool: " +
                     segregate_flag(rule));
  // Prose after the rule is shortened too.
  const std::string more = segregate_flag(rule) + "; or pad " + name;
  CHECK(fix_with_display_names(more, {name}) ==
        segregate_flag(rule) + "; or pad _Map_base<...>::operator[](long const&)");
  // The plain form shortens everything (messages).
  CHECK(with_display_names(fix, {name}).find("--segregate 'function=_Map_base<...>") !=
        std::string::npos);
  CHECK(fix_with_display_names("put the fields on lines of their own: " + name, {name}) ==
        "put the fields on lines of their own: _Map_base<...>::operator[](long const&)");
}

TEST_CASE("names that shorten alike keep what tells them apart", "[text]") {
  using memlayout::cli::DisplayNames;
  const std::string desc = "Desc* make<Desc>() (sets.cpp:9)";
  const std::string node = "Node* make<Node>() (sets.cpp:9)";
  const std::string other = "ns::Tree<ns::Layout>::new_node(long) (tree.cpp:3)";
  const DisplayNames shown({desc, node, other});
  CHECK(shown(desc) == "make<Desc>() (sets.cpp:9)");
  CHECK(shown(node) == "make<Node>() (sets.cpp:9)");
  CHECK(shown(other) == "Tree<...>::new_node(long) (tree.cpp:3)");
  // Prose naming both.
  CHECK(with_display_names("segregate " + desc + " from " + node, {desc, node}) ==
        "segregate make<Desc>() (sets.cpp:9) from make<Node>() (sets.cpp:9)");
  // Names alike even with their arguments keep the whole name.
  const std::string a = "a::x::f<int>() (a.cpp:1)", b = "b::x::f<int>() (a.cpp:1)";
  const DisplayNames whole({a, b});
  CHECK(whole(a) == a);
  CHECK(whole(b) == b);
}

TEST_CASE("counts name their noun in the singular for one", "[text]") {
  using memlayout::cli::counted;
  CHECK(counted(1, "finding") == "1 finding");
  CHECK(counted(0, "finding") == "0 findings");
  CHECK(counted(2, "live object") == "2 live objects");
}

TEST_CASE("valid_utf8 keeps well-formed text and replaces each bad byte", "[text_format]") {
  using memlayout::cli::valid_utf8;
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(valid_utf8("plain ascii") == "plain ascii");
  CHECK(valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") ==
        "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  CHECK(valid_utf8("bad\xFF\xFE") == "bad" + fffd + fffd);
  CHECK(valid_utf8("\xC0\xAF") == fffd + fffd);                       // overlong '/'
  CHECK(valid_utf8("\xED\xA0\x80") == fffd + fffd + fffd);            // a surrogate
  CHECK(valid_utf8("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd); // past U+10FFFF
  CHECK(valid_utf8("cut \xE2\x82") == "cut " + fffd + fffd);          // sequence cut short
  CHECK(valid_utf8(std::string("a\0b", 3)) == std::string("a\0b", 3));
}

// The text tables' name columns: a pool named in UTF-8 ("größe", "池")
// was padded by bytes, and the columns after it moved left.
TEST_CASE("fit_column counts characters, not bytes", "[text_format]") {
  using memlayout::cli::fit_column;
  CHECK(fit_column("nodes", 8) == "nodes   ");
  CHECK(fit_column("größe", 8) == "größe   ");
  CHECK(fit_column("池", 3) == "池  ");
  CHECK(fit_column("abcdefghij", 5) == "abcd~");
  CHECK(fit_column("größengröße", 6) == "größe~");
  CHECK(fit_column("", 2) == "  ");
}
