#include "rules.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <string>

using namespace memlayout::rules;

namespace {

Rule parse_ok(const std::string &spec) {
  Rule r;
  ParseError e{};
  INFO(spec);
  REQUIRE(parse_rule(spec.data(), spec.size(), 1, &r, &e));
  return r;
}

ParseError parse_bad(const std::string &spec) {
  Rule r;
  ParseError e{};
  INFO(spec);
  REQUIRE_FALSE(parse_rule(spec.data(), spec.size(), 7, &r, &e));
  CHECK(e.line == 7);
  return e;
}

std::string format(const Rule &r) {
  char buf[2048];
  REQUIRE(format_rule(r, buf, sizeof buf) > 0);
  return buf;
}

} // namespace

TEST_CASE("rules: match keys and actions parse") {
  Rule r = parse_ok("function=make_node,pool=nodes");
  CHECK(std::string(r.function) == "make_node");
  CHECK(std::string(r.pool) == "nodes");
  CHECK_FALSE(r.has_size);

  r = parse_ok(" size = 40-48 , pad=64, align=64 ");
  CHECK(r.has_size);
  CHECK(r.size_min == 40);
  CHECK(r.size_max == 48);
  CHECK(r.pad == 64);
  CHECK(r.align == 64);
  CHECK(r.pool[0] == 0);

  r = parse_ok("file=src/tree.c:120,pool=t,hugepages=1");
  CHECK(std::string(r.file) == "src/tree.c");
  CHECK(r.file_line == 120);
  CHECK(r.huge_pages);

  r = parse_ok("size=2k,pool=big");
  CHECK(r.size_min == 2048);

  // Commas inside template arguments and parameter lists stay in the name.
  r = parse_ok("function=std::map<int, long>::emplace(int, long),pool=m");
  CHECK(std::string(r.function) == "std::map<int, long>::emplace(int, long)");
  CHECK(std::string(r.pool) == "m");
}

TEST_CASE("rules: canonical form round-trips") {
  for (const char *spec : {"function=make_node,pool=nodes", "file=a.c:3,size=1-8,pad=16",
                           "size=64,type=Node,pool=n,align=64,hugepages=1"}) {
    Rule r = parse_ok(spec);
    std::string text = format(r);
    Rule again = parse_ok(text);
    CHECK(format(again) == text);
  }
  CHECK(format(parse_ok("pool=x, function=f")) == "function=f,pool=x");
}

TEST_CASE("rules: errors name the column") {
  ParseError e = parse_bad("function=f,colour=red");
  CHECK(e.column == 12);
  CHECK(std::string(e.message).find("unknown key 'colour'") != std::string::npos);

  e = parse_bad("function=f,pool=nodes,align=48");
  CHECK(e.column == 29);
  CHECK(std::string(e.message).find("power of two") != std::string::npos);

  e = parse_bad("size=9-3,pool=p");
  CHECK(e.column == 6);
  e = parse_bad("size=abc,pool=p");
  CHECK(std::string(e.message).find("bad size") != std::string::npos);
  e = parse_bad("pool=nodes");
  CHECK(std::string(e.message).find("match key") != std::string::npos);
  e = parse_bad("function=f");
  CHECK(std::string(e.message).find("action") != std::string::npos);
  e = parse_bad("function");
  CHECK(std::string(e.message).find("no value") != std::string::npos);
  e = parse_bad("function=f,pool=a b");
  CHECK(e.column == 18);
  // A comma left out: the blank before the next key is the place.
  e = parse_bad("function=a pool=x");
  CHECK(e.column == 11);
  CHECK(std::string(e.message).find("a blank before 'pool='") != std::string::npos);
  // A blank in a function's parameters is the name's own.
  RuleSet params{};
  std::string ok = "function=make(int, long),pool=p\n";
  CHECK(parse_rules(ok.data(), ok.size(), &params, &e));
  e = parse_bad("file=x.c:12a,pool=p");
  e = parse_bad("size=8,hugepages=1");
  CHECK(std::string(e.message).find("needs pool") != std::string::npos);
  e = parse_bad("function=f,pool=");
  CHECK(std::string(e.message).find("empty value") != std::string::npos);
  // A key given twice would have the second win silently.
  e = parse_bad("function=f,pool=x,pool=y");
  CHECK(e.column == 19);
  CHECK(std::string(e.message).find("'pool' given twice") != std::string::npos);
  e = parse_bad("size=8,function=f,size=16,pad=64");
  CHECK(std::string(e.message).find("'size' given twice") != std::string::npos);
  // One rule is one line: a newline inside one (from a report's JSON or
  // --segregate) would read back from a rules file as two.
  e = parse_bad("function=a\nfunction=b,pool=x");
  CHECK(e.column == 11);
  CHECK(std::string(e.message).find("control character (0x0a)") != std::string::npos);
  e = parse_bad(std::string("function=a\x1b[2J,pool=x"));
  CHECK(e.column == 11);
}

TEST_CASE("rules: overloaded operators are names, their commas and brackets too") {
  Rule r{};
  ParseError e{};
  const std::string comma = "function=B::operator,(long),pool=x";
  REQUIRE(parse_rule(comma.data(), comma.size(), 1, &r, &e));
  CHECK(std::string(r.function) == "B::operator,(long)");
  CHECK(std::string(r.pool) == "x");
  const std::string less = "function=Key::operator<,pool=y,align=64";
  REQUIRE(parse_rule(less.data(), less.size(), 1, &r, &e));
  CHECK(std::string(r.function) == "Key::operator<");
  CHECK(r.align == 64);
  const std::string call = "function=Make::operator()(int) const,pool=z";
  REQUIRE(parse_rule(call.data(), call.size(), 1, &r, &e));
  CHECK(std::string(r.function) == "Make::operator()(int) const");
  CHECK(function_key_matches("B::operator,(long)", "B::operator,(long)"));
  // A comma that ends the rule promised another key.
  const std::string trailing = "function=a,pool=x,";
  REQUIRE_FALSE(parse_rule(trailing.data(), trailing.size(), 1, &r, &e));
  CHECK(std::string(e.message).find("ends in a comma") != std::string::npos);
  CHECK(e.column == 18);
  // A word ending in "operator" is no operator.
  const std::string word = "function=my_operator,pool=w";
  REQUIRE(parse_rule(word.data(), word.size(), 1, &r, &e));
  CHECK(std::string(r.function) == "my_operator");
}

TEST_CASE("rules: a file of rules, comments and blank lines") {
  std::string text = "# nodes apart from descriptors\n"
                     "\n"
                     "function=new_node,pool=nodes   # the hot type\n"
                     "  size=48,pad=64\n";
  RuleSet set{};
  ParseError e{};
  REQUIRE(parse_rules(text.data(), text.size(), &set, &e));
  REQUIRE(set.count == 2);
  CHECK(set.rules[0].source_line == 3);
  CHECK(set.rules[1].source_line == 4);

  // A byte order mark before the first key (Windows editors), CRLF endings.
  std::string bom = "\xEF\xBB\xBF"
                    "function=new_node,pool=nodes\r\nsize=48,pad=64\r\n";
  RuleSet set5{};
  REQUIRE(parse_rules(bom.data(), bom.size(), &set5, &e));
  REQUIRE(set5.count == 2);
  CHECK(std::string(set5.rules[0].function) == "new_node");
  CHECK(set5.rules[1].pad == 64);

  // A '#' inside a word is the word's (GCC's lambda names); after a blank it
  // starts a comment.
  std::string lambda = "function=Holder<main::{lambda(long)#1}>::make,pool=q\t# a lambda's\n"
                       "function=a#b,pool=r\n";
  RuleSet set4{};
  REQUIRE(parse_rules(lambda.data(), lambda.size(), &set4, &e));
  REQUIRE(set4.count == 2);
  CHECK(std::string(set4.rules[0].function) == "Holder<main::{lambda(long)#1}>::make");
  CHECK(std::string(set4.rules[0].pool) == "q");
  CHECK(std::string(set4.rules[1].function) == "a#b");

  std::string bad = "function=a,pool=x\n\nsize=1,pool=x,zap=1\n";
  RuleSet set2{};
  REQUIRE_FALSE(parse_rules(bad.data(), bad.size(), &set2, &e));
  CHECK(e.line == 3);
  CHECK(e.column == 15);

  std::string many;
  for (int i = 0; i < 65; ++i)
    many += "size=" + std::to_string(i + 1) + ",pad=64\n";
  RuleSet set3{};
  REQUIRE_FALSE(parse_rules(many.data(), many.size(), &set3, &e));
  CHECK(e.line == 65);
}

TEST_CASE("rules: function names normalize to their scopes") {
  char buf[256];
  REQUIRE(
      normalize_function("ns::Tree<int, std::less<int> >::alloc_node(int) const", buf, sizeof buf));
  CHECK(std::string(buf) == "ns::Tree::alloc_node");
  REQUIRE(normalize_function("void foo<int>(int)", buf, sizeof buf));
  CHECK(std::string(buf) == "foo");
  REQUIRE(normalize_function("(anonymous namespace)::make(long)", buf, sizeof buf));
  CHECK(std::string(buf) == "(anonymous namespace)::make");
  REQUIRE(normalize_function("make_node", buf, sizeof buf));
  CHECK(std::string(buf) == "make_node");
}

TEST_CASE("rules: mangled and plain symbols match by trailing scopes") {
  // memlayout::trees::IntLf<memlayout::trees::BaselineLayout>::new_node(long, long)
  const char *member = "_ZN9memlayout5trees5IntLfINS0_14BaselineLayoutEE8new_nodeEll";
  CHECK(symbol_matches(member, "new_node"));
  CHECK(symbol_matches(member, "IntLf::new_node"));
  CHECK(symbol_matches(
      member, "memlayout::trees::IntLf<memlayout::trees::BaselineLayout>::new_node(long, long)"));
  CHECK_FALSE(symbol_matches(member, "new_descriptor"));
  CHECK_FALSE(symbol_matches(member, "Other::new_node"));
  CHECK_FALSE(symbol_matches(member, "node"));

  CHECK(symbol_matches("make_node", "make_node"));
  CHECK(symbol_matches("make_node.constprop.0", "make_node"));
  CHECK_FALSE(symbol_matches("make_nodes", "make_node"));
  CHECK(symbol_matches("_Z9make_nodel", "make_node"));
  CHECK(symbol_matches("_ZL9make_nodel", "make_node"));    // static
  CHECK(symbol_matches("_ZNK4Tree4findEl", "Tree::find")); // const member
  CHECK(symbol_matches("_ZN12_GLOBAL__N_14makeEv", "(anonymous namespace)::make"));
  CHECK(symbol_matches("_ZNSt6vectorIiSaIiEE9push_backERKi", "std::vector::push_back"));
  CHECK(symbol_matches("_ZN4TreeC2Ev", "Tree::Tree"));         // constructor
  CHECK_FALSE(symbol_matches("_ZZ4mainENKUlvE_clEv", "main")); // a lambda in main
  // Closure and unnamed types among template arguments: their "E_" closes no level.
  // Holder<main::{lambda(long)#1}>::make(long)
  CHECK(symbol_matches("_ZN6HolderIZ4mainEUllE_E4makeEl", "Holder::make"));
  CHECK(symbol_matches("_ZN6HolderIZ4mainEUllE_E4makeEl", "make"));
  CHECK_FALSE(symbol_matches("_ZN6HolderIZ4mainEUllE_E4makeEl", "Other::make"));
  // std::thread::_State_impl<std::thread::_Invoker<std::tuple<main::{lambda()#1}> > >::_M_run()
  const char *run = "_ZNSt6thread11_State_implINS_8_InvokerISt5tupleIJZ4mainEUlvE_EEEEE6_M_runEv";
  CHECK(symbol_matches(run, "_State_impl::_M_run"));
  CHECK(symbol_matches(run, "std::thread::_State_impl::_M_run"));
  // Holder<main::{lambda(long)#2}> and an unnamed struct: Holder<main::{unnamed type#1}>
  CHECK(symbol_matches("_ZN6HolderIZ4mainEUllE0_E4makeEl", "Holder::make"));
  CHECK(symbol_matches("_ZN6HolderIZ4mainEUt_E4makeEv", "Holder::make"));
  CHECK(demangled_matches("Holder<main::{lambda(long)#1}>::make(long)", "Holder::make"));

  // GCC clones: the symbol, its demangled forms and a rule naming a clone
  // all mean the function.
  CHECK(symbol_matches("make_node.constprop.0", "make_node.constprop.0"));
  CHECK(symbol_matches("make_node.isra.0.cold", "make_node"));
  CHECK(symbol_matches("make_node", "make_node.part.1"));
  CHECK(symbol_matches("_ZN6HolderIZ4mainEUllE_E4makeEl.constprop.0", "Holder::make"));
  CHECK_FALSE(symbol_matches("make_node.constprop.0", "make"));
  CHECK(function_key_matches("Holder<main::'lambda'(long)>::make(long) (.constprop.0)",
                             "Holder<main::'lambda'(long)>::make(long) (.constprop.0)"));
  CHECK(function_key_matches("Tree::make(long) [clone .isra.0]", "Tree::make(long)"));
  CHECK(function_key_matches("make_node.constprop.0", "make_node"));
  CHECK(function_key_matches("make_node", "make_node.constprop.0"));
  CHECK_FALSE(symbol_matches("_Z", "x"));
  CHECK_FALSE(symbol_matches("_ZN3foo", "foo")); // truncated: no crash, no match

  CHECK(demangled_matches(
      "memlayout::trees::IntLf<memlayout::trees::FixedLayout>::new_node(long, long)",
      "IntLf::new_node"));
  CHECK_FALSE(demangled_matches("alloc_node_pool(int)", "alloc_node"));
}

TEST_CASE("rules: wrapper declarations in a rules file") {
  std::string text = "wrapper=pool_get   # detected\n"
                     "function=create_node,pool=nodes\n"
                     " not-wrapper = new_node(long, long)\n"
                     "wrapper=my_alloc_*\n";
  RuleSet set{};
  ParseError e{};
  REQUIRE(parse_rules(text.data(), text.size(), &set, &e));
  CHECK(set.count == 1);
  REQUIRE(set.wrapper_count == 3);
  CHECK(std::string(set.wrappers[0].function) == "pool_get");
  CHECK_FALSE(set.wrappers[0].not_wrapper);
  CHECK(set.wrappers[0].source_line == 1);
  CHECK(std::string(set.wrappers[1].function) == "new_node(long, long)");
  CHECK(set.wrappers[1].not_wrapper);
  CHECK(std::string(set.wrappers[2].function) == "my_alloc_*");

  std::string empty = "function=a,pool=x\nwrapper=\n";
  RuleSet s2{};
  REQUIRE_FALSE(parse_rules(empty.data(), empty.size(), &s2, &e));
  CHECK(e.line == 2);
  CHECK(std::string(e.message).find("empty value") != std::string::npos);

  std::string two = "wrapper=a,pool=x\n";
  RuleSet s3{};
  REQUIRE_FALSE(parse_rules(two.data(), two.size(), &s3, &e));
  CHECK(e.column == 10);
  CHECK(std::string(e.message).find("one function") != std::string::npos);

  // '*' alone would look through every function, to _start.
  std::string every = "not-wrapper=**\n";
  RuleSet s5{};
  REQUIRE_FALSE(parse_rules(every.data(), every.size(), &s5, &e));
  CHECK(e.line == 1);
  CHECK(std::string(e.message).find("names every function") != std::string::npos);

  // A wrapper is a declaration, not a rule: --segregate takes rules only.
  parse_bad("wrapper=pool_get");
  // "wrappers=" is an unknown key of a rule, not a declaration.
  std::string typo = "wrappers=x\n";
  RuleSet s4{};
  REQUIRE_FALSE(parse_rules(typo.data(), typo.size(), &s4, &e));
  CHECK(std::string(e.message).find("unknown key") != std::string::npos);
}

TEST_CASE("rules: function keys with template arguments or parameters name one function") {
  // Plain keys match by scopes, every instantiation and overload.
  CHECK(function_key_matches("ns::Tree<int>::new_node(int)", "new_node"));
  CHECK(function_key_matches("ns::Tree<int>::new_node(int)", "Tree::new_node"));
  CHECK(function_key_matches("create_node", "create_node"));
  CHECK_FALSE(function_key_matches("create_nodes", "create_node"));
  // Template arguments must match.
  CHECK(function_key_matches("ns::Tree<int>::new_node(int)", "Tree<int>::new_node"));
  CHECK_FALSE(function_key_matches("ns::Tree<long>::new_node(long)", "Tree<int>::new_node"));
  // A parameter list picks one overload; white space does not matter.
  CHECK(function_key_matches("make(int, long)", "make(int,long)"));
  CHECK_FALSE(function_key_matches("make(int)", "make(int, long)"));
  CHECK(function_key_matches("ns::LfTree<long>::new_node(long, long)",
                             "LfTree<long>::new_node(long, long)"));
  // A scope boundary, not any suffix.
  CHECK_FALSE(function_key_matches("ns::XTree<int>::new_node(int)", "Tree<int>::new_node(int)"));
  // Return types of function templates are not part of the name.
  CHECK(function_key_matches("std::unique_ptr<Op> make_op<Op>(int)", "make_op<Op>(int)"));
  CHECK(function_name_offset("std::unique_ptr<Op> make_op<Op>(int)") == 20);
  CHECK(function_name_offset("operator new(unsigned long)") == 0);
}

// A rule after one that matches all it matches never routes anything: the
// run's summary and replay say which rule comes first, instead of "the
// sites it names made no allocation" of a function that made thousands.
TEST_CASE("rules: a rule covered by an earlier one") {
  auto covers = [](const std::string &a, const std::string &b) {
    return rule_covers(parse_ok(a), parse_ok(b));
  };
  CHECK(covers("function=make_node,pool=a", "function=make_node,pool=b"));
  CHECK(covers("function=make_node,pool=a", "function=make_node,size=64,pool=b"));
  CHECK(covers("size=1-128,pool=a", "function=make_node,size=64-72,pool=b"));
  CHECK(covers("file=tree.c,pool=a", "file=tree.c:40,pool=b"));
  CHECK_FALSE(covers("function=make_node,size=64,pool=a", "function=make_node,pool=b"));
  CHECK_FALSE(covers("function=make_node,pool=a", "function=make_desc,pool=b"));
  CHECK_FALSE(covers("size=64-72,pool=a", "size=60-72,pool=b"));
  CHECK_FALSE(covers("file=tree.c:40,pool=a", "file=tree.c:41,pool=b"));
  CHECK_FALSE(covers("type=Node,pool=a", "function=make_node,pool=b"));

  RuleSet set{};
  const char text[] = "function=make_node,pool=nodes\n"
                      "function=make_desc,pool=nodes\n"
                      "function=make_node,pool=other\n";
  ParseError e{};
  REQUIRE(parse_rules(text, sizeof text - 1, &set, &e));
  REQUIRE(set.count == 3);
  CHECK(first_covering_rule(set, 0) == 0);
  CHECK(first_covering_rule(set, 1) == 1);
  CHECK(first_covering_rule(set, 2) == 0);
}
