// Rules against allocation sites, offline: the same matching the interposer
// does at run time through its route table (route_table.h), for `replay`,
// `advise`'s check of its own rules and the summaries of what rules route.
#pragma once

#include "heap_model.h"
#include "report.h"
#include "rules.h"

#include <string>
#include <vector>

namespace memlayout::inspector {

// Whether `rule`'s match keys hold for an allocation of `size` bytes at
// `site` (alloc_site.h), `type` being the record the site allocates ("" when
// unknown): function names the site's function (rules::function_key_matches),
// file its file (a path suffix) and line, size the requested size, type the
// record. A rule without a function key matches sites of any function.
bool rule_matches(const rules::Rule &rule, const Group::Site &site, uint64_t size,
                  const std::string &type);

// The first rule of `set` that matches, or -1: rules are tried in order.
int first_matching_rule(const rules::RuleSet &set, const Group::Site &site, uint64_t size,
                        const std::string &type);

// The groups of a report a rule routes (ids), judged by each group's site,
// most common requested size and type; a realloc-grown group by any size up
// to its own (its objects began smaller).
std::vector<uint32_t> groups_routed(const rules::Rule &rule, const Report &report);

// The requested sizes a group's objects had; unknown ones (a report from
// before they were kept) are any size up to the class, and a realloc-grown
// group's began at any size up to the one it has.
struct SizeSpan {
  uint64_t lo, hi;
};
SizeSpan requested_span(const Group &g);

// Whether a rule written for `target`'s objects may route `g`'s too: the
// groups in `also` (the size classes a merged finding lists), another
// site's objects of target's (known) type, such as a root node made apart
// from the others, and a group of target's site whose requested sizes meet
// target's (no size key tells them apart: a buffer grown at one line). Not
// the site's other groups: one line of inlined library code can make
// several records (make_shared's block, a hash node, a list node, a bucket
// array), each of sizes of its own.
bool routed_along(const Group &target, const Group &g, const std::vector<uint32_t> &also = {});

// The rule in canonical form (rules::format_rule), as every report and
// message quotes it; empty when it does not fit.
std::string rule_text(const rules::Rule &r);

// `--segregate RULE` as a shell takes it: RULE in single quotes where it has
// characters a shell would act on (C++ names bring <, >, (, ), &, *, ' and
// spaces), so that a fix pasted from a report runs as printed.
std::string segregate_flag(const std::string &rule);
// The rule of the first --segregate flag in `text` (as segregate_flag wrote
// it, quoted or not), up to where prose goes on; empty when there is none.
std::string segregate_flag_rule(const std::string &text);

// Rules with the same match keys route the same allocations: advise writes
// them as one rule, and the report ranks them as one fix.
std::string match_keys_of(const rules::Rule &r);
// Whether `first` matches every allocation `later` does, so that `later`,
// after it, never routes anything: the same site keys, and a size range
// that holds the later one's.
bool shadows(const rules::Rule &first, const rules::Rule &later);
// Folds b's actions into a (same match keys): the larger pad and alignment,
// a's pool unless it has none, huge pages if either asks.
void merge_actions(rules::Rule &a, const rules::Rule &b);

} // namespace memlayout::inspector
