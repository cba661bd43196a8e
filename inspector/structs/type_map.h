// A type map: the JSON `memlayout structs --format json` writes, read back
// so that `memlayout report` can name allocation groups by the type their
// call site allocates and take hot prefixes from field lists
// (docs/structs.md, "Naming report groups by type").
#pragma once

#include "record_layout.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memlayout::inspector {

class TypeMap {
public:
  // nullopt with `error` ("PATH: records[2].fields[0]: no offset") when the
  // file cannot be read or is not a structs map.
  static std::optional<TypeMap> load(const std::string &path, std::string &error);
  static std::optional<TypeMap> parse(std::string_view json, const std::string &path,
                                      std::string &error);

  const std::string &path() const { return path_; }
  const std::vector<RecordLayout> &records() const { return records_; }
  const std::vector<AllocSite> &sites() const { return sites_; }

  // A record by its full name, else by its unqualified name when only one
  // record has it (record_selected()).
  const RecordLayout *record(const std::string &name) const;
  // The same for objects allocated in `site_file`: where translation units
  // define different records of one name (C's file-private struct entry),
  // the one defined in the file whose path shares most with it.
  const RecordLayout *record(const std::string &name, const std::string &site_file) const;
  // The layout `variant` of that record (0: as the lookup above).
  const RecordLayout *record(const std::string &name, const std::string &site_file,
                             uint32_t variant) const;
  // The bytes from r's start through the named member (prefix_through()),
  // looked for in r, then in the records of its bases this map holds, at
  // the base's offset: C++ names an inherited member as its own ("x"), or
  // with its base's scope ("Base::x"). nullopt when neither has it.
  std::optional<uint64_t> prefix_through(const RecordLayout &r, std::string_view field) const;
  // The names a member of r goes by in prefix_through: its members', an
  // unnamed struct's or union's members', its bases' (a base of no record
  // here by the base's own name).
  std::vector<std::string> member_names(const RecordLayout &r) const;
  // How many layouts translation units gave that record (RecordLayout::
  // variant): the lookups without one return the first.
  uint32_t layouts_of(const RecordLayout &r) const;

  // The type allocated at a recorded call site, "" when the map cannot say.
  // A site matches on the file (the longest common path suffix wins, so
  // build trees moved elsewhere still match) and a line within the
  // allocating expression; several types there (a template's
  // instantiations) are told apart by `function`. Without file and line
  // (no debug line info), by the function alone when all its sites
  // allocate one type. A site the map does not have that is the standard
  // library allocating for make_unique<T> or make_shared<T> (the call site
  // the report sees there) gives T when the map has that record.
  //
  // `in_library`: the allocation came through the standard library's frames
  // (a container growing: `v.push_back(new T)`), so the line's
  // new-expression is not it; only a factory's site (make_unique<T>,
  // make_shared<T>) there can be.
  //
  // `column`: the recorded site's (GCC's: where the expression ends), which
  // tells a line's several allocations apart: each is the map's site that
  // starts last at or before it.
  std::string type_at(const std::string &function, const std::string &file, uint32_t line,
                      bool in_library = false, uint32_t column = 0) const;

  // type_at's answer, and whether the site's objects hold the record behind
  // a header: make_shared<T> and allocate_shared<T> allocate T inside
  // libstdc++'s control block (_Sp_counted_ptr_inplace), 16 bytes in.
  struct SiteType {
    std::string type;
    bool in_control_block = false;
    // Which of the record's layouts the site's translation unit gave it
    // (RecordLayout::variant); 0 when it has one, or the sites disagree.
    uint32_t variant = 0;
  };
  SiteType site_type(const std::string &function, const std::string &file, uint32_t line,
                     bool in_library = false, uint32_t column = 0) const;

  // What a function hands out, by the map's sites that call it: a site
  // whose `call` is `callee` (by its unqualified name, as recorded stacks
  // name it: "zcalloc", "ns::Pool::get(unsigned long)") at the caller's
  // call, matched as site_type() matches. Without a caller (no stack shows
  // one), the single place in the map that calls it, if there is one. For
  // a one-caller allocating function, which the report keeps as the site
  // rather than look through (docs/report.md): `client *c =
  // zcalloc(sizeof(client))` types the objects of zcalloc's calloc.
  struct Caller {
    std::string function, file;
    uint32_t line = 0;
  };
  SiteType called_type(const std::string &callee, const Caller *caller) const;

private:
  SiteType factory_type(const std::string &function) const;
  // site_type() over `candidates`: nullopt when none is at the file and line
  // (or, without them, in the function).
  std::optional<SiteType> match(const std::vector<const AllocSite *> &candidates,
                                const std::string &function, const std::string &file, uint32_t line,
                                uint32_t column = 0) const;

  std::string path_;
  std::vector<RecordLayout> records_;
  std::vector<AllocSite> sites_;
  std::vector<std::string> canonical_functions_; // sites_' functions, canonical_cxx_name'd
};

// Where `memlayout report` looks for a map when --types does not name one:
// beside the recorded executable, EXECUTABLE.memlayout-types.json.
std::string type_map_beside(const std::string &executable);

} // namespace memlayout::inspector
