// memlayout advise: the findings of a report as a rules file, ready for
// `memlayout run --rules`, `record --rules` and `replay --rules`.
#include "command_line.h"
#include "command_output.h"
#include "commands.h"
#include "pool_layout.h"
#include "render.h"
#include "replay.h"
#include "report_input.h"
#include "rule_args.h"
#include "rule_match.h"
#include "rules.h"

#include <algorithm>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

namespace memlayout::cli {
namespace {

// Text from the report (a message, a name, the damage) on one line of the
// rules file: a newline in a crafted or damaged report would otherwise start
// a line that reads back as a rule or a wrapper declaration.
std::string one_line(std::string s) {
  for (char &c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = ' ';
  return s;
}

struct MergedRule {
  rules::Rule rule;
  std::vector<const inspector::Finding *> because;
  const inspector::RuleStat *in_force = nullptr; // a rule the trace was recorded under
  std::string layout; // what keep_pool_layout added to the merged rule, and why
  // What the replay of the trace under the rules said of this rule: actions
  // it added, or a finding it predicts that the rule would make.
  std::vector<std::string> replay_notes;
};

const inspector::GroupReport *by_id(const inspector::Report &r, uint32_t id) {
  for (const auto &g : r.groups)
    if (g.group.id == id)
      return &g;
  return nullptr;
}

// The rules file's text for a replay: the wrappers the rules need, then the
// rules in the order they will be written.
std::string replay_rules_text(const std::vector<inspector::LookedThrough> &wrappers,
                              const std::vector<MergedRule *> &kept) {
  std::string text;
  for (const auto &w : wrappers)
    if (one_line(w.function) == w.function)
      text += "wrapper=" + w.function + "\n";
  for (const MergedRule *m : kept)
    text += inspector::rule_text(m->rule) + "\n";
  return text;
}

// Findings of `predicted` (medium and high) about groups that `m` routes,
// of kinds the recording did not have for the groups it routes there: what
// the rule would make.
std::vector<const inspector::Finding *> made_by(const MergedRule &m,
                                                const inspector::Report &recorded,
                                                const inspector::Report &predicted) {
  std::vector<uint32_t> before = inspector::groups_routed(m.rule, recorded);
  std::vector<uint32_t> after = inspector::groups_routed(m.rule, predicted);
  std::vector<const inspector::Finding *> made;
  for (const auto &f : predicted.findings) {
    if (inspector::severity_rank(f.severity) < inspector::severity_rank("medium") ||
        f.groups.empty() || std::find(after.begin(), after.end(), f.groups[0]) == after.end())
      continue;
    bool had = std::any_of(recorded.findings.begin(), recorded.findings.end(), [&](const auto &o) {
      return o.kind == f.kind && std::any_of(o.groups.begin(), o.groups.end(), [&](uint32_t id) {
               return std::find(before.begin(), before.end(), id) != before.end();
             });
    });
    if (!had)
      made.push_back(&f);
  }
  return made;
}

// Replays the trace under the rules about to be written and looks for
// findings they would make (a pool's class putting aligned objects a power
// of two of lines apart, or packed ones across lines): a rule that would
// make one takes the align and pad of that finding's own fix, and is
// replayed again; one that still makes a finding is written with it said
// in a comment (and on stderr), since it fixes what it was written for.
void check_by_replay(const std::string &trace, const inspector::ReportOptions &o,
                     const inspector::Report &recorded,
                     const std::vector<inspector::LookedThrough> &wrappers,
                     std::vector<MergedRule *> &kept) {
  if (std::none_of(kept.begin(), kept.end(), [](const MergedRule *m) { return !m->in_force; }))
    return;
  auto replay = [&](inspector::Report &predicted) {
    LoadedRules rules;
    std::string error;
    if (!load_rules_text(replay_rules_text(wrappers, kept), "advise's rules", &rules))
      return false;
    // Named by their text: a line of that text is no line of the file written.
    for (unsigned i = 0; i < rules.set->count; ++i)
      rules.origin[i] = "advise's rule " + inspector::rule_text(rules.written[i]);
    inspector::ReportOptions ro = o;
    ro.progress = false;
    // Warnings of what rules route are the report's and advise's own to give.
    if (!replay_layout(trace, rules, ro, "", "memlayout advise (replay)", predicted, error)) {
      std::fprintf(stderr,
                   "memlayout advise: warning: the rules could not be checked by a replay%s%s\n",
                   error.empty() ? "" : ": ", error.c_str());
      return false;
    }
    return true;
  };
  inspector::Report predicted;
  if (!replay(predicted))
    return;
  std::vector<std::pair<MergedRule *, std::string>> adjusted;
  for (MergedRule *m : kept) {
    if (m->in_force)
      continue;
    for (const inspector::Finding *f : made_by(*m, recorded, predicted)) {
      rules::Rule fix;
      rules::ParseError e{};
      if (f->rule.empty() || !rules::parse_rule(f->rule.data(), f->rule.size(), 1, &fix, &e) ||
          (fix.pad <= m->rule.pad && fix.align <= m->rule.align))
        continue;
      std::string added;
      if (fix.align > m->rule.align)
        added += "align=" + std::to_string(m->rule.align = fix.align);
      if (fix.pad > m->rule.pad)
        added += (added.empty() ? "" : ",") + ("pad=" + std::to_string(m->rule.pad = fix.pad));
      adjusted.emplace_back(m, added + ": without it the replay predicts " + f->severity + " " +
                                   f->kind + ": " + f->message);
    }
  }
  if (!adjusted.empty() && !replay(predicted))
    return;
  for (auto &[m, why] : adjusted)
    m->replay_notes.push_back("added after a replay: " + why);
  for (MergedRule *m : kept) {
    if (m->in_force)
      continue;
    for (const inspector::Finding *f : made_by(*m, recorded, predicted)) {
      // A fix that puts the objects in the pool this rule already puts them
      // in would send the user round in a circle.
      rules::Rule fix;
      rules::ParseError e{};
      bool circular = !f->rule.empty() && m->rule.pool[0] &&
                      rules::parse_rule(f->rule.data(), f->rule.size(), 1, &fix, &e) &&
                      std::strcmp(fix.pool, m->rule.pool) == 0;
      std::string note =
          "the replay predicts this rule makes " + f->severity + " " + f->kind + ": " + f->message +
          (circular         ? std::string("; the fix a report gives it names the pool this rule "
                                                  "already puts the objects in: no further rule of advise's")
           : f->fix.empty() ? ""
                            : "; fix: " + f->fix);
      m->replay_notes.push_back("warning: " + note);
      std::fprintf(stderr, "memlayout advise: warning: %s: %s\n",
                   inspector::rule_text(m->rule).c_str(), note.c_str());
    }
  }
}

} // namespace

int advise_main(int argc, char **argv) {
  std::string input, output;
  std::string min_severity = "low";
  bool no_replay = false;
  inspector::ReportOptions o;
  auto app = make_command(
      "advise",
      "Writes segregation rules that carry out the fixes of FILE's findings: a pool for a\n"
      "type interleaved with others, padding or alignment for objects that straddle or\n"
      "share lines, huge pages for a spread pool. FILE is a trace or a report saved with\n"
      "'memlayout report --format json'. Rules that match the same allocations are\n"
      "merged; each is checked against the report's groups first, and one that would\n"
      "route nothing or another group too is not written (the file says why).\n\n"
      "Then: memlayout run --rules RULES -- PROGRAM (or compare), or check first with\n"
      "memlayout replay FILE --rules RULES.");
  app->add_option("FILE", input, "a trace or a JSON report")->required();
  app->add_option("-o,--output", output, "write the rules to RULES instead of stdout (- is stdout)")
      ->check(a_path())
      ->type_name("RULES");
  app->add_option("--min-severity", min_severity, "the least severe findings to fix")
      ->check(one_of({"low", "medium", "high"}))
      ->type_name("low|medium|high")
      ->capture_default_str();
  app->add_flag("--no-replay", no_replay,
                "write the rules without replaying FILE under them first (a trace's rules are "
                "checked by the layout they would make)");
  add_analysis_options(*app, o);
  if (int rc = parse_command(*app, argc, argv); rc >= 0)
    return rc;
  if (output_is_an_input(output, {input, o.types_file, o.cache_file}, "advise"))
    return 2;
  o.progress = isatty(2);
  inspector::Report report;
  std::string kind, error;
  if (!load_report_input(input, o, report, kind, error)) {
    std::fprintf(stderr, "memlayout advise: %s\n", error.c_str());
    return 2;
  }

  std::vector<MergedRule> merged;
  std::map<std::string, size_t> index;
  // The rules the trace was recorded under come first, as they were: a rules
  // file written without them would undo the fixes they made. A finding
  // about objects one of them routes adds its actions to it (the pool's
  // options), since a rule after it would never match them.
  std::vector<std::vector<uint32_t>> in_force_routes;
  for (const auto &stat : report.rules) {
    rules::Rule r;
    rules::ParseError e{};
    if (!rules::parse_rule(stat.rule.data(), stat.rule.size(), 1, &r, &e))
      continue;
    index.emplace(inspector::match_keys_of(r), merged.size());
    merged.push_back({r, {}, &stat, {}, {}});
    in_force_routes.push_back(inspector::groups_routed(r, report));
  }
  size_t without_rule = 0, considered = 0;
  for (const auto &f : report.findings) {
    if (inspector::severity_rank(f.severity) < inspector::severity_rank(min_severity))
      continue;
    ++considered;
    rules::Rule r;
    rules::ParseError e{};
    if (f.rule.empty() || !rules::parse_rule(f.rule.data(), f.rule.size(), 1, &r, &e)) {
      ++without_rule;
      continue;
    }
    auto routes =
        std::find_if(in_force_routes.begin(), in_force_routes.end(), [&](const auto &ids) {
          return !f.groups.empty() && std::count(ids.begin(), ids.end(), f.groups[0]);
        });
    if (routes != in_force_routes.end()) {
      MergedRule &m = merged[static_cast<size_t>(routes - in_force_routes.begin())];
      if (inspector::match_keys_of(r) == inspector::match_keys_of(m.rule)) {
        // A pool that rules in force share mixes their objects: the
        // finding's own pool takes them apart.
        bool shared = std::count_if(merged.begin(), merged.end(), [&](const MergedRule &o) {
                        return o.in_force && std::strcmp(o.rule.pool, m.rule.pool) == 0;
                      }) > 1;
        if (shared && r.pool[0])
          std::memcpy(m.rule.pool, r.pool, sizeof m.rule.pool);
        inspector::merge_actions(m.rule, r);
        m.because.push_back(&f);
        continue;
      }
      // A narrower rule (a size key the one in force lacks): it goes before
      // that one, in a pool of its own, with its actions as well.
      inspector::merge_actions(r, m.rule);
    }
    std::string key = inspector::match_keys_of(r);
    auto [it, fresh] = index.emplace(key, merged.size());
    if (fresh)
      merged.push_back({r, {&f}, nullptr, {}, {}});
    else {
      inspector::merge_actions(merged[it->second].rule, r);
      merged[it->second].because.push_back(&f);
    }
  }

  // Each rule is checked against the report's groups, whose sites are the
  // ones the interposer will match: it must route the groups it was written
  // for and nothing else.
  std::vector<std::string> refused;
  std::vector<MergedRule *> kept;
  std::vector<inspector::LookedThrough> wrappers;
  for (auto &m : merged) {
    std::string text = inspector::rule_text(m.rule);
    std::vector<uint32_t> routed = inspector::groups_routed(m.rule, report);
    if (!m.in_force) { // one in force routed what it routed
      // The groups it is for: the findings' groups the rule matches.
      const inspector::GroupReport *target = nullptr;
      for (const auto *f : m.because)
        for (uint32_t id : f->groups)
          if (!target && std::find(routed.begin(), routed.end(), id) != routed.end())
            target = by_id(report, id);
      if (!target) {
        refused.push_back(text + ": it would route nothing (no group's site matches it)");
        continue;
      }
      std::vector<uint32_t> merged; // the size classes merged findings list
      for (const auto *f : m.because)
        if (f->metric.count("groups_merged"))
          merged.insert(merged.end(), f->groups.begin(), f->groups.end());
      std::string others;
      for (uint32_t id : routed) {
        const inspector::GroupReport *g = by_id(report, id);
        if (inspector::routed_along(target->group, g->group, merged))
          continue; // a size class its findings list, or its type elsewhere: as intended
        others += (others.empty() ? "" : ", ") + std::string("group ") + std::to_string(id) + " " +
                  g->group.name + " (" + std::to_string(g->objects) + " objects)";
      }
      if (!others.empty()) {
        refused.push_back(text + ": it would also route " + others +
                          ", whose site has the same name; tell them apart with --not-wrapper "
                          "or a size= key, or segregate in code (docs/segregation-api.md)");
        continue;
      }
      // Merged, the findings' actions make a pool none of them was checked
      // for alone (a page_spread pool with a straddle fix's alignment): it
      // must not make a finding of its own either.
      m.layout = inspector::keep_pool_layout(m.rule, *target, inspector::FindingThresholds{});
    }
    kept.push_back(&m);
    for (uint32_t id : routed)
      for (const auto &w : by_id(report, id)->group.site.looked_through)
        if (w.reason != inspector::WrapperReason::kBuiltin &&
            std::none_of(wrappers.begin(), wrappers.end(),
                         [&](const auto &x) { return x.function == w.function; }))
          wrappers.push_back(w);
  }

  // New rules first: a narrower one must come before the rule in force it
  // narrows, which would match first otherwise.
  std::stable_partition(kept.begin(), kept.end(), [](const MergedRule *m) { return !m->in_force; });
  // The interposer takes at most kMaxRules rules and kMaxWrappers wrapper
  // declarations: a file past them is refused whole by `run` and `replay`.
  // The rules come most severe first; those past the limits are not written.
  {
    std::vector<MergedRule *> within;
    std::vector<inspector::LookedThrough> needed;
    for (MergedRule *m : kept) {
      std::vector<inspector::LookedThrough> more;
      for (uint32_t id : inspector::groups_routed(m->rule, report))
        for (const auto &w : by_id(report, id)->group.site.looked_through) {
          auto same = [&](const auto &x) { return x.function == w.function; };
          if (w.reason != inspector::WrapperReason::kBuiltin &&
              std::none_of(needed.begin(), needed.end(), same) &&
              std::none_of(more.begin(), more.end(), same))
            more.push_back(w);
        }
      if (within.size() == rules::kMaxRules) {
        refused.push_back(inspector::rule_text(m->rule) + ": `run` takes at most " +
                          std::to_string(rules::kMaxRules) +
                          " rules, and the ones written are for more severe findings");
        continue;
      }
      if (needed.size() + more.size() > rules::kMaxWrappers) {
        refused.push_back(inspector::rule_text(m->rule) + ": its sites are found through " +
                          std::to_string(more.size()) + " more wrappers, past the " +
                          std::to_string(rules::kMaxWrappers) + " declarations `run` takes");
        continue;
      }
      within.push_back(m);
      needed.insert(needed.end(), more.begin(), more.end());
    }
    kept = std::move(within);
    wrappers = std::move(needed);
  }
  if (kind == "trace" && !no_replay)
    check_by_replay(input, o, report, wrappers, kept);

  std::string text = "# memlayout rules from " + one_line(input) + " (memlayout advise)\n";
  text += "# apply: memlayout run --rules FILE -- PROGRAM   check: memlayout replay TRACE "
          "--rules FILE\n";
  // A rules file read without the terminal's messages still says so.
  if (!report.damage.empty())
    text += "# the trace is damaged (" + one_line(report.damage) +
            "): these rules come from the records before the damage\n";
  else if (report.partial)
    text += "# the trace is incomplete (" +
            (report.cut_cause.empty() ? "the program did not finish writing it"
                                      : one_line(report.cut_cause)) +
            "): these rules come from what it wrote\n";
  if (!wrappers.empty()) {
    text += "\n# the sites below were found through these wrappers; the rules route their\n"
            "# callers' allocations only while they are looked through\n";
    for (const auto &w : wrappers) {
      // A wrapper's name is a declaration's value: one with a control
      // character in it is not one the rules file can say.
      if (one_line(w.function) != w.function)
        continue;
      text += "wrapper=" + w.function + "   # " + inspector::wrapper_reason_name(w.reason) +
              (w.evidence.empty() ? "" : ": " + one_line(w.evidence)) + "\n";
    }
  }
  // A rule in force whose groups the new rules route all of stays as a
  // comment: it would route nothing after them.
  std::set<uint32_t> routed_by_new;
  for (const MergedRule *m : kept)
    if (!m->in_force)
      for (uint32_t id : inspector::groups_routed(m->rule, report))
        routed_by_new.insert(id);
  auto replaced = [&](const MergedRule *m) {
    std::vector<uint32_t> mine = inspector::groups_routed(m->rule, report);
    return !mine.empty() && std::all_of(mine.begin(), mine.end(),
                                        [&](uint32_t id) { return routed_by_new.count(id); });
  };
  const std::string in_force_words =
      report.rules_replayed ? "applied by the replay" : "in force when the trace was recorded";
  size_t written = 0;
  std::vector<const MergedRule *> before; // the rules written so far, which match first
  for (const auto *m : kept) {
    text += "\n";
    if (!m->in_force)
      if (auto it = std::find_if(
              before.begin(), before.end(),
              [&](const MergedRule *b) { return inspector::shadows(b->rule, m->rule); });
          it != before.end()) {
        std::string why = inspector::rule_text(m->rule) + ": the rule " +
                          inspector::rule_text((*it)->rule) +
                          " before it matches every allocation it would (the first match routes)";
        text += "# not written: " + one_line(why) + "\n";
        std::fprintf(stderr, "memlayout advise: not written: %s\n", why.c_str());
        continue;
      }
    before.push_back(m);
    if (m->in_force && replaced(m)) {
      text += "# " + in_force_words +
              ", replaced by the rules above: " + inspector::rule_text(m->rule) + "\n";
      continue;
    }
    if (m->in_force)
      text += "# " + in_force_words + ": routed " + std::to_string(m->in_force->allocations) +
              " allocations" +
              (m->because.empty() ? "" : "; with the actions of the findings below") + "\n";
    for (const auto *f : m->because)
      text += "# " + one_line(f->severity) + " " + one_line(f->kind) + ": " + one_line(f->message) +
              "\n";
    if (!m->layout.empty())
      text += "# the pool's layout: " + one_line(m->layout) + "\n";
    for (const auto &note : m->replay_notes)
      text += "# " + one_line(note) + "\n";
    char buf[4096];
    size_t n = rules::format_rule(m->rule, buf, sizeof buf);
    text.append(buf, n).push_back('\n');
    ++written;
  }
  for (const auto &why : refused) {
    text += "\n# not written: " + one_line(why) + "\n";
    std::fprintf(stderr, "memlayout advise: not written: %s\n", why.c_str());
  }
  bool new_actions = std::any_of(merged.begin(), merged.end(),
                                 [](const MergedRule &m) { return !m.because.empty(); });
  if (!new_actions)
    text += "\n# no finding" + std::string(considered ? " has a fix a rule can carry out" : "") +
            (report.rules.empty() ? ": nothing to change\n"
                                  : ": nothing to change beyond the rules in force\n");

  if (output == "-") // as for most tools: stdout
    output.clear();
  CommandOutput out("advise");
  if (!out.open(output, with_files_read({input}, report)))
    return 2;
  out.stream() << text;
  if (!out.close())
    return 2;
  std::fprintf(stderr, "memlayout: %zu rule%s for %zu finding%s", written, written == 1 ? "" : "s",
               considered - without_rule, considered - without_rule == 1 ? "" : "s");
  if (without_rule)
    std::fprintf(stderr, " (%zu more without a rule-shaped fix)", without_rule);
  std::fprintf(stderr, "%s%s\n", output.empty() ? "" : " -> ", output.c_str());
  return report_exit_status(report, "advise");
}

} // namespace memlayout::cli
