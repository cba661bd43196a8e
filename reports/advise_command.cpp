// memlayout advise: the findings of a report as a rules file, ready for
// `memlayout run --rules`, `record --rules` and `replay --rules`.
#include "analysis_options.h"
#include "commands.h"
#include "report_input.h"
#include "rules.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

namespace memlayout::cli {
namespace {

constexpr const char *kUsage =
    "usage: memlayout advise FILE [options]\n"
    "\n"
    "Writes segregation rules that carry out the fixes of FILE's findings: a\n"
    "pool for a type interleaved with others, padding or alignment for objects\n"
    "that straddle or share lines, huge pages for a spread pool. FILE is a\n"
    "trace or a report saved with 'memlayout report --format json'. Rules that\n"
    "match the same allocations are merged into one.\n"
    "\n"
    "options:\n"
    "  -o, --output RULES     write the rules to RULES (default stdout)\n"
    "  --min-severity LEVEL   low (default), medium or high\n"
    "  --at peak|end|mark:NAME  the moment analysed in a trace (default peak)\n"
    "  --hot NAME=BYTES       as for 'memlayout report'; repeatable\n"
    "  --cache FILE           cache geometry from FILE instead of this machine's\n"
    "  --wrapper NAME         a function to look through as an allocation wrapper\n"
    "  --not-wrapper NAME     a function never to look through, even if detected\n"
    "  -h, --help             this text\n"
    "\n"
    "Then: memlayout run --rules RULES -- PROGRAM, or check first with\n"
    "memlayout replay FILE --rules RULES.\n";

int usage_error(const std::string &message) {
  std::fprintf(stderr, "memlayout advise: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

int severity_rank(const std::string &s) { return s == "high" ? 2 : s == "medium" ? 1 : 0; }

struct MergedRule {
  rules::Rule rule;
  std::vector<const inspector::Finding *> because;
};

// Folds b's actions into a (same match keys): the larger pad and alignment,
// a's pool unless it has none, huge pages if either asks.
void merge_actions(rules::Rule &a, const rules::Rule &b) {
  if (!a.pool[0])
    std::memcpy(a.pool, b.pool, sizeof a.pool);
  a.pad = std::max(a.pad, b.pad);
  a.align = std::max(a.align, b.align);
  a.huge_pages = a.huge_pages || b.huge_pages;
}

std::string match_key(const rules::Rule &r) {
  rules::Rule m = r;
  m.pool[0] = 0;
  m.pad = m.align = 0;
  m.huge_pages = false;
  m.pad = 1; // any action: format_rule only writes what is set
  char buf[4096];
  size_t n = rules::format_rule(m, buf, sizeof buf);
  return std::string(buf, n);
}

} // namespace

int advise_main(int argc, char **argv) {
  std::string input, output;
  std::string min_severity = "low";
  inspector::ReportOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string option_error;
    OptionParse taken = parse_analysis_option(argc, argv, i, o, option_error);
    if (taken == OptionParse::kError)
      return usage_error(option_error);
    if (taken == OptionParse::kTaken)
      continue;
    auto value = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-o" || a == "--output") {
      const char *v = value();
      if (!v || !*v)
        return usage_error(a + " needs a path");
      output = v;
    } else if (a == "--min-severity") {
      const char *v = value();
      if (!v || (std::strcmp(v, "low") && std::strcmp(v, "medium") && std::strcmp(v, "high")))
        return usage_error(std::string("--min-severity takes low, medium or high, not '") +
                           (v ? v : "") + "'");
      min_severity = v;
    } else if (!a.empty() && a[0] == '-') {
      return usage_error("unknown option '" + a + "'");
    } else if (input.empty()) {
      input = a;
    } else {
      return usage_error("one input expected, got '" + input + "' and '" + a + "'");
    }
  }
  if (input.empty())
    return usage_error("no input: give a trace or a JSON report");
  o.progress = isatty(2);
  inspector::Report report;
  std::string kind, error;
  if (!load_report_input(input, o, report, kind, error)) {
    std::fprintf(stderr, "memlayout advise: %s\n", error.c_str());
    return 2;
  }

  std::vector<MergedRule> merged;
  std::map<std::string, size_t> index;
  size_t without_rule = 0, considered = 0;
  for (const auto &f : report.findings) {
    if (severity_rank(f.severity) < severity_rank(min_severity))
      continue;
    ++considered;
    rules::Rule r;
    rules::ParseError e{};
    if (f.rule.empty() || !rules::parse_rule(f.rule.data(), f.rule.size(), 1, &r, &e)) {
      ++without_rule;
      continue;
    }
    std::string key = match_key(r);
    auto [it, fresh] = index.emplace(key, merged.size());
    if (fresh)
      merged.push_back({r, {&f}});
    else {
      merge_actions(merged[it->second].rule, r);
      merged[it->second].because.push_back(&f);
    }
  }

  std::string text = "# memlayout rules from " + input + " (memlayout advise)\n";
  text += "# apply: memlayout run --rules FILE -- PROGRAM   check: memlayout replay TRACE "
          "--rules FILE\n";
  for (const auto &m : merged) {
    text += "\n";
    for (const auto *f : m.because)
      text += "# " + f->severity + " " + f->kind + ": " + f->message + "\n";
    char buf[4096];
    size_t n = rules::format_rule(m.rule, buf, sizeof buf);
    text.append(buf, n).push_back('\n');
  }
  if (merged.empty())
    text += "\n# no finding" + std::string(considered ? " has a fix a rule can carry out" : "") +
            ": nothing to change\n";

  if (output.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) {
      std::fprintf(stderr, "memlayout advise: cannot write '%s': %s\n", output.c_str(),
                   std::strerror(errno));
      return 2;
    }
  }
  std::fprintf(stderr, "memlayout: %zu rule%s for %zu finding%s", merged.size(),
               merged.size() == 1 ? "" : "s", considered - without_rule,
               considered - without_rule == 1 ? "" : "s");
  if (without_rule)
    std::fprintf(stderr, " (%zu more without a rule-shaped fix)", without_rule);
  std::fprintf(stderr, "%s%s\n", output.empty() ? "" : " -> ", output.c_str());
  return report.partial ? 1 : 0;
}

} // namespace memlayout::cli
