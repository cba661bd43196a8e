#include "type_map.h"

#include "json_input.h"

#include "cxx_names.h"
#include "rules.h"
#include "structs_report.h"

#include <llvm/Support/Error.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/MemoryBuffer.h>

#include <algorithm>
#include <limits>
#include <string_view>

namespace memlayout::inspector {
namespace {

namespace json = llvm::json;

bool narrow(const json::Value &v, uint32_t &out, json::Path p) {
  uint64_t wide = 0;
  if (!json::fromJSON(v, wide, p))
    return false;
  if (wide > std::numeric_limits<uint32_t>::max()) {
    p.report("number too large");
    return false;
  }
  out = static_cast<uint32_t>(wide);
  return true;
}

// A key that may be absent: `out` keeps its default then.
template <typename F>
bool optional_key(const json::Object &o, llvm::StringLiteral key, json::Path p, F read) {
  const json::Value *v = o.get(key);
  return !v || read(*v, p.field(key));
}

bool read_field(const json::Value &v, FieldLayout &f, json::Path p) {
  json::ObjectMapper m(v, p);
  if (!m || !m.map("name", f.name) || !m.map("type", f.type) || !m.map("offset", f.offset) ||
      !m.map("size", f.size) || !m.mapOptional("align", f.align))
    return false;
  const json::Object &o = *v.getAsObject();
  std::string role = role_name(f.role), sync;
  if (!m.mapOptional("role", role) || !m.mapOptional("sync", sync))
    return false;
  auto r = parse_role(role);
  auto s = parse_sync(sync);
  if (!r) {
    p.field("role").report("not field, base, virtual_base or vptr");
    return false;
  }
  if (!s) {
    p.field("sync").report("not atomic or lock");
    return false;
  }
  f.role = *r;
  f.sync = *s;
  auto u32 = [](uint32_t &out) {
    return [&out](const json::Value &x, json::Path q) { return narrow(x, out, q); };
  };
  if (!optional_key(o, "bit_offset", p, u32(f.bit_offset)) ||
      !optional_key(o, "bit_size", p, u32(f.bit_size)) || !m.mapOptional("nested", f.nested))
    return false;
  if (const json::Array *members = o.getArray("members")) {
    f.members.resize(members->size());
    for (size_t i = 0; i < members->size(); ++i)
      if (!read_field((*members)[i], f.members[i],
                      p.field("members").index(static_cast<unsigned>(i))))
        return false;
  }
  return true;
}

bool read_record(const json::Value &v, RecordLayout &r, json::Path p) {
  json::ObjectMapper m(v, p);
  if (!m || !m.map("name", r.name) || !m.map("size", r.size) || !m.map("align", r.align) ||
      !m.mapOptional("kind", r.kind) || !m.mapOptional("file", r.file) ||
      !m.mapOptional("spelled", r.spelled))
    return false;
  const json::Object &o = *v.getAsObject();
  if (!optional_key(o, "line", p,
                    [&](const json::Value &x, json::Path q) { return narrow(x, r.line, q); }) ||
      !optional_key(o, "variant", p,
                    [&](const json::Value &x, json::Path q) { return narrow(x, r.variant, q); }) ||
      !m.mapOptional("translation_units", r.translation_units))
    return false;
  const json::Array *fields = o.getArray("fields");
  if (!fields) {
    p.field("fields").report("missing array");
    return false;
  }
  r.fields.resize(fields->size());
  for (size_t i = 0; i < fields->size(); ++i)
    if (!read_field((*fields)[i], r.fields[i], p.field("fields").index(static_cast<unsigned>(i))))
      return false;
  compute_holes(r);
  return true;
}

bool read_site(const json::Value &v, AllocSite &s, json::Path p) {
  json::ObjectMapper m(v, p);
  if (!m || !m.map("file", s.file) || !m.map("function", s.function) || !m.map("type", s.type) ||
      !m.map("call", s.call) || !m.mapOptional("dependent", s.dependent))
    return false;
  const json::Object &o = *v.getAsObject();
  auto u32 = [](uint32_t &out) {
    return [&out](const json::Value &x, json::Path q) { return narrow(x, out, q); };
  };
  if (!o.get("line")) {
    p.field("line").report("missing value");
    return false;
  }
  return optional_key(o, "line", p, u32(s.line)) && optional_key(o, "column", p, u32(s.column)) &&
         optional_key(o, "end_line", p, u32(s.end_line)) &&
         optional_key(o, "variant", p, u32(s.variant));
}

std::string basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// Path components two paths share at their ends ("a/b/c.cpp", "/x/b/c.cpp": 2).
size_t common_suffix(std::string_view a, std::string_view b) {
  size_t n = 0;
  while (!a.empty() && !b.empty()) {
    size_t sa = a.rfind('/'), sb = b.rfind('/');
    std::string_view ca = sa == std::string_view::npos ? a : a.substr(sa + 1);
    std::string_view cb = sb == std::string_view::npos ? b : b.substr(sb + 1);
    if (ca != cb || ca.empty() || ca == "..")
      break;
    ++n;
    a = sa == std::string_view::npos ? std::string_view() : a.substr(0, sa);
    b = sb == std::string_view::npos ? std::string_view() : b.substr(0, sb);
  }
  return n;
}

bool starts_as_function(const std::string &recorded, const std::string &mapped) {
  if (mapped.empty() || recorded.compare(0, mapped.size(), mapped) != 0)
    return false;
  if (recorded.size() == mapped.size())
    return true;
  char next = recorded[mapped.size()];
  return next == '(' || next == '<' || next == ' ';
}

// A symbolizer's name ("Tree<int>::insert(int)") against a map's qualified
// name without parameters ("Tree<int>::insert"), as written and as
// canonical_cxx_name spells both: the demangler's "std::__cxx11::basic_string<
// char, std::char_traits<char>, std::allocator<char> >" is clang's
// "std::basic_string<char>".
struct Spelled {
  const std::string &written, &canonical;
};
bool same_function(Spelled recorded, Spelled mapped) {
  return starts_as_function(recorded.written, mapped.written) ||
         starts_as_function(recorded.canonical, mapped.canonical);
}

// A recorded function's name as a call site's `call` has it: its last scope
// of rules::normalize_function's ("ns::Pool<int>::get(long) const" -> "get",
// "void* zcalloc(unsigned long)" -> "zcalloc").
std::string unqualified_function(const std::string &recorded) {
  char buf[1024];
  size_t n = rules::normalize_function(recorded.c_str(), buf, sizeof buf);
  std::string_view f(buf, n);
  size_t scope = f.rfind("::");
  return std::string(scope == std::string_view::npos ? f : f.substr(scope + 2));
}

// "F<A>" for a constructor "F<A>::F(int)" (a name as the demangler gives
// it, return type removed), else empty.
std::string constructed_class(std::string_view f) {
  int depth = 0;
  size_t scope = std::string_view::npos;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '<')
      ++depth;
    else if (f[i] == '>')
      --depth;
    else if (depth == 0 && f[i] == '(') {
      f = f.substr(0, i);
      break;
    } else if (depth == 0 && f.substr(i, 2) == "::")
      scope = i;
  }
  if (scope == std::string_view::npos || scope + 2 > f.size())
    return {};
  std::string_view cls = f.substr(0, scope), own = cls.substr(0, cls.find('<'));
  if (size_t outer = own.rfind("::"); outer != std::string_view::npos)
    own.remove_prefix(outer + 2);
  return f.substr(scope + 2) == own ? std::string(cls) : std::string();
}

// The one type `sites` allocate (none when several or none), in a control
// block when every one of them is a make_shared.
TypeMap::SiteType single_type(const std::vector<const AllocSite *> &sites) {
  TypeMap::SiteType t{{}, !sites.empty(), sites.empty() ? 0 : sites[0]->variant};
  for (const AllocSite *s : sites) {
    if (!t.type.empty() && s->type != t.type)
      return {};
    t.type = s->type;
    t.in_control_block = t.in_control_block && is_std_shared_factory(s->call);
    if (s->variant != t.variant)
      t.variant = 0; // a header's site in translation units that disagree
  }
  if (t.type.empty())
    t.in_control_block = false;
  return t;
}

} // namespace

std::optional<TypeMap> TypeMap::load(const std::string &path, std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    error = path + ": " + buffer.getError().message();
    return std::nullopt;
  }
  return parse((*buffer)->getBuffer(), path, error);
}

std::optional<TypeMap> TypeMap::parse(std::string_view text, const std::string &path,
                                      std::string &error) {
  std::optional<json::Value> doc = parse_json_input(text, path, error);
  if (!doc)
    return std::nullopt;
  const json::Object *top = doc->getAsObject();
  auto schema = top ? top->getString("schema") : llvm::None;
  if (!schema || !schema->startswith("memlayout.structs/")) {
    error = path + ": not a type map (no \"schema\": \"" + kStructsSchema +
            "\"; write one with memlayout structs --format json)";
    return std::nullopt;
  }
  TypeMap map;
  map.path_ = path;
  json::Path::Root root("map");
  json::Path p(root);
  bool ok = true;
  const json::Array *records = top->getArray("records");
  const json::Array *sites = top->getArray("sites");
  if (!records || !sites) {
    (records ? p.field("sites") : p.field("records")).report("missing array");
    ok = false;
  }
  for (size_t i = 0; ok && i < records->size(); ++i) {
    RecordLayout r;
    ok = read_record((*records)[i], r, p.field("records").index(static_cast<unsigned>(i)));
    map.records_.push_back(std::move(r));
  }
  for (size_t i = 0; ok && i < sites->size(); ++i) {
    AllocSite s;
    ok = read_site((*sites)[i], s, p.field("sites").index(static_cast<unsigned>(i)));
    map.sites_.push_back(std::move(s));
  }
  if (!ok) {
    error = path + ": " + llvm::toString(root.getError());
    return std::nullopt;
  }
  for (const AllocSite &s : map.sites_)
    map.canonical_functions_.push_back(canonical_cxx_name(s.function));
  return map;
}

const RecordLayout *TypeMap::record(const std::string &name, const std::string &site_file) const {
  const RecordLayout *r = record(name);
  if (!r)
    return nullptr;
  const RecordLayout *best = r;
  size_t best_score = common_suffix(r->file, site_file);
  for (const RecordLayout &other : records_)
    if (other.name == r->name && &other != r) {
      size_t score = common_suffix(other.file, site_file);
      if (score > best_score) {
        best = &other;
        best_score = score;
      }
    }
  return best;
}

const RecordLayout *TypeMap::record(const std::string &name, const std::string &site_file,
                                    uint32_t variant) const {
  const RecordLayout *r = record(name, site_file);
  if (!r || !variant || r->variant == variant)
    return r;
  for (const RecordLayout &other : records_)
    if (other.name == r->name && other.file == r->file && other.line == r->line &&
        other.variant == variant)
      return &other;
  return r;
}

uint32_t TypeMap::layouts_of(const RecordLayout &r) const {
  uint32_t n = 0;
  for (const RecordLayout &other : records_)
    n += other.name == r.name && other.file == r.file && other.line == r.line;
  return n;
}

namespace {

// Bases of bases: deep enough for any real hierarchy, finite on a map that
// names a record its own base.
constexpr int kMaxBaseDepth = 16;

bool is_base(const FieldLayout &f) {
  return f.role == FieldRole::kBase || f.role == FieldRole::kVirtualBase;
}

} // namespace

std::optional<uint64_t> TypeMap::prefix_through(const RecordLayout &r,
                                                std::string_view field) const {
  // Breadth first, each record with where it starts in r.
  const size_t scope = field.rfind("::"); // "Base::x": the member x of the base named Base
  const std::string scope_name(scope == std::string_view::npos ? "" : field.substr(0, scope));
  std::vector<std::pair<const RecordLayout *, uint64_t>> level{{&r, 0}};
  for (int depth = 0; depth < kMaxBaseDepth && !level.empty(); ++depth) {
    std::vector<std::pair<const RecordLayout *, uint64_t>> bases;
    for (auto [rec, at] : level) {
      if (auto bytes = inspector::prefix_through(*rec, field))
        return at + *bytes;
      for (const FieldLayout &b : rec->fields) {
        if (!is_base(b))
          continue;
        const RecordLayout *base = record(b.name, rec->file);
        if (base && !scope_name.empty() && record_selected(*base, scope_name)) {
          if (auto bytes = inspector::prefix_through(*base, field.substr(scope + 2)))
            return at + b.offset + *bytes;
        }
        if (base && base != rec)
          bases.emplace_back(base, at + b.offset);
      }
    }
    level = std::move(bases);
  }
  return std::nullopt;
}

std::vector<std::string> TypeMap::member_names(const RecordLayout &r) const {
  std::vector<std::string> names;
  std::vector<const RecordLayout *> seen{&r};
  // `file`: the record's whose fields these are, where its bases are looked up.
  auto add = [&](auto &self, const std::vector<FieldLayout> &fields, const std::string &file,
                 int depth) -> void {
    for (const FieldLayout &f : fields) {
      if (f.role == FieldRole::kVptr)
        continue;
      if (f.name.empty()) { // an unnamed struct or union: C names its members directly
        self(self, f.members, file, depth);
        continue;
      }
      const RecordLayout *base = is_base(f) ? record(f.name, file) : nullptr;
      if (!base || depth >= kMaxBaseDepth ||
          std::find(seen.begin(), seen.end(), base) != seen.end()) {
        names.push_back(f.name);
        continue;
      }
      seen.push_back(base);
      self(self, base->fields, base->file, depth + 1);
    }
  };
  add(add, r.fields, r.file, 0);
  return names;
}

const RecordLayout *TypeMap::record(const std::string &name) const {
  const RecordLayout *found = nullptr;
  for (const RecordLayout &r : records_) {
    if (r.name == name)
      return &r;
    if (record_selected(r, name)) {
      if (found && found->name != r.name)
        return nullptr; // ambiguous without its scope
      found = &r;
    }
  }
  return found;
}

std::string TypeMap::type_at(const std::string &function, const std::string &file, uint32_t line,
                             bool in_library, uint32_t column) const {
  return site_type(function, file, line, in_library, column).type;
}

TypeMap::SiteType TypeMap::site_type(const std::string &recorded, const std::string &file,
                                     uint32_t line, bool in_library, uint32_t column) const {
  std::vector<const AllocSite *> all;
  all.reserve(sites_.size());
  for (const AllocSite &s : sites_)
    if (!in_library || is_std_factory(s.call))
      all.push_back(&s);
  std::optional<SiteType> t = match(all, recorded, file, line, column);
  return t ? *t : factory_type(recorded);
}

std::optional<TypeMap::SiteType> TypeMap::match(const std::vector<const AllocSite *> &candidates,
                                                const std::string &recorded,
                                                const std::string &file, uint32_t line,
                                                uint32_t column) const {
  // The demangler names a function template's specialization with its
  // return type first ("SkipNode<5>* mk<5>(long)"); the map by the name.
  const std::string function = recorded.substr(rules::function_name_offset(recorded.c_str()));
  const std::string canonical = canonical_cxx_name(function);
  auto same = [&](const AllocSite *s) {
    size_t i = static_cast<size_t>(s - sites_.data());
    return same_function({function, canonical}, {s->function, canonical_functions_[i]});
  };
  std::vector<const AllocSite *> best;
  if (!file.empty() && line) {
    const std::string base = basename(file);
    size_t best_score = 0;
    for (const AllocSite *s : candidates) {
      if (line < s->line || line > std::max(s->line, s->end_line) || basename(s->file) != base)
        continue;
      size_t score = common_suffix(s->file, file);
      if (score > best_score)
        best.clear();
      if (score >= best_score) {
        best_score = score;
        best.push_back(s);
      }
    }
    if (best.empty()) {
      // An implicit constructor's code is at its class's head (GCC's line
      // for it): what it allocates is its default member initializers'.
      const std::string cls = constructed_class(function);
      const RecordLayout *r = cls.empty() ? nullptr : record(cls, file);
      if (!r || r->line != line || basename(r->file) != base)
        return std::nullopt;
      for (const AllocSite *s : candidates)
        if (same(s) && basename(s->file) == base)
          best.push_back(s);
      return best.empty() ? std::nullopt : std::optional<SiteType>(single_type(best));
    }
    // A template's own text, where instantiations are there too (maps made
    // before placement new in templates was left out): the instantiations'.
    if (std::any_of(best.begin(), best.end(), [](const AllocSite *s) { return !s->dependent; }))
      std::erase_if(best, [](const AllocSite *s) { return s->dependent; });
    // Several allocations on the line (`sink(new A()); sink(new B());`, a
    // macro's): the recorded column (GCC's, where the expression ends) is
    // the one of the expression that starts last at or before it.
    if (column && single_type(best).type.empty()) {
      uint32_t start = 0;
      for (const AllocSite *s : best)
        if (s->line == line && s->column && s->column <= column)
          start = std::max(start, s->column);
      if (start) {
        std::vector<const AllocSite *> at = best;
        std::erase_if(at,
                      [&](const AllocSite *s) { return s->line != line || s->column != start; });
        if (SiteType t = single_type(at); !t.type.empty())
          return t;
      }
    }
    if (SiteType t = single_type(best); !t.type.empty() || function.empty())
      return t;
    std::erase_if(best, [&](const AllocSite *s) { return !same(s); });
    return single_type(best);
  }
  if (function.empty())
    return SiteType{};
  for (const AllocSite *s : candidates)
    if (same(s))
      best.push_back(s);
  if (best.empty())
    return std::nullopt;
  return single_type(best);
}

TypeMap::SiteType TypeMap::called_type(const std::string &callee, const Caller *caller) const {
  const std::string name = unqualified_function(callee);
  if (name.empty())
    return {};
  std::vector<const AllocSite *> calls;
  for (const AllocSite &s : sites_)
    if (s.call == name)
      calls.push_back(&s);
  if (calls.empty())
    return {};
  if (caller) {
    std::optional<SiteType> t = match(calls, caller->function, caller->file, caller->line);
    return t ? *t : SiteType{};
  }
  // No stack says which call it was: the one place that calls it, if one.
  for (const AllocSite *s : calls)
    if (s->file != calls[0]->file || s->line != calls[0]->line)
      return {};
  return single_type(calls);
}

TypeMap::SiteType TypeMap::factory_type(const std::string &function) const {
  // libstdc++'s frames that allocate on behalf of make_unique<T> and
  // make_shared<T> / allocate_shared<T>, whose first template argument is T.
  struct Factory {
    std::string_view name;
    bool in_control_block;
  };
  static constexpr Factory kFactories[] = {{"make_unique<", false},
                                           {"_MakeUniq<", false},
                                           {"_Sp_counted_ptr_inplace<", true},
                                           {"make_shared<", true},
                                           {"allocate_shared<", true}};
  for (const Factory &factory : kFactories) {
    size_t at = function.find(factory.name);
    if (at == std::string::npos)
      continue;
    size_t begin = at + factory.name.size(), i = begin;
    for (int depth = 0; i < function.size(); ++i) {
      char c = function[i];
      if (c == '<' || c == '(')
        ++depth;
      else if ((c == '>' || c == ')') && depth > 0)
        --depth;
      else if (depth == 0 && (c == ',' || c == '>'))
        break;
    }
    std::string type = function.substr(begin, i - begin);
    if (const RecordLayout *r = record(type); r && r->name == type)
      return {type, factory.in_control_block};
  }
  return {};
}

std::string type_map_beside(const std::string &executable) {
  return executable.empty() ? std::string() : executable + ".memlayout-types.json";
}

} // namespace memlayout::inspector
