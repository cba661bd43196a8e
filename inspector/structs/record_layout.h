// A record type's layout as the compiler fixed it, and the places a program
// allocates it. Filled from clang's AST by `memlayout structs`
// (struct_layout.h, alloc_sites.h), written out as the type map, read back
// by `memlayout report --types` (type_map.h). Free of clang so that readers
// of the map do not pay for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memlayout::inspector {

enum class FieldRole : uint8_t {
  kField,       // a data member
  kBase,        // a non-virtual base class subobject
  kVirtualBase, // a virtual base class subobject
  kVptr,        // the vtable pointer the record introduces itself
};

// Fields whose writes other cores contend for: a line holding one of these
// is a line other threads' writes keep invalidating.
enum class SyncKind : uint8_t {
  kNone,
  kAtomic, // std::atomic<T>, _Atomic, std::atomic_flag
  kLock,   // mutexes, spin locks, reader-writer locks, condition variables
};

const char *role_name(FieldRole r); // "field", "base", "virtual_base", "vptr"
const char *sync_name(SyncKind s);  // "", "atomic", "lock"
std::optional<FieldRole> parse_role(std::string_view s);
std::optional<SyncKind> parse_sync(std::string_view s);

struct FieldLayout {
  std::string name;        // the member's name; a base's type name; "vptr"; "" when anonymous
  std::string type;        // as written in the source, typedefs kept
  uint64_t offset = 0;     // bytes from the record's start; bit-fields: the byte of their first bit
  uint64_t size = 0;       // bytes; bit-fields: the bytes their bits touch
  uint64_t align = 1;      // of the member's type, alignas included (what a reorder must keep)
  uint32_t bit_offset = 0; // bit-fields only: bits from the record's start
  uint32_t bit_size = 0;   // bit-fields only: the width; 0 for every other field
  FieldRole role = FieldRole::kField;
  SyncKind sync = SyncKind::kNone;
  // A member of a struct or union type without a name (C11's anonymous
  // members, `union {...} u;`): its own members, offsets from the outer
  // record's start as pahole shows them; `nested` is "struct" or "union".
  std::vector<FieldLayout> members;
  std::string nested;

  bool is_bitfield() const { return bit_size != 0; }
  // Where the field's bits start and end, counted from the record's start.
  uint64_t begin_bit() const { return is_bitfield() ? bit_offset : offset * 8; }
  uint64_t end_bit() const {
    return is_bitfield() ? uint64_t{bit_offset} + bit_size : (offset + size) * 8;
  }
};

struct Hole {
  uint64_t offset = 0, size = 0; // bytes
};

struct RecordLayout {
  std::string name; // qualified, template arguments included; C: the tag or typedef name
  // The name without template arguments equal to their defaults, as code
  // writes it (`ns::Table<int>` for `ns::Table<int, std::string, 4>`);
  // empty when that is `name`. -C and --hot take either.
  std::string spelled;
  std::string kind; // "struct", "class" or "union"
  std::string file; // where it is defined
  uint32_t line = 0;
  uint64_t size = 0, align = 1;    // sizeof, alignof
  std::vector<FieldLayout> fields; // by offset; a union's in declaration order
  std::vector<Hole> holes;         // whole unused bytes between members
  uint64_t bit_holes = 0;          // unused bits in bytes that bit-fields partly use
  uint64_t tail_padding = 0;       // unused bytes after the last member
  bool packed = false;             // __attribute__((packed)) or #pragma pack below natural
  // `int : 0` members hold nothing and are not in `fields`, but they move
  // what follows them: no reorder of the fields alone keeps the layout.
  bool zero_width_bitfields = false;
  // A header compiled with different -D flags can give one record (same
  // name, same definition) different layouts in different translation
  // units: then each distinct layout is reported, numbered from 1, with the
  // translation units that gave it ("src/a.c -DBIG_MODE"). 0: one layout.
  uint32_t variant = 0;
  std::vector<std::string> translation_units;

  bool is_union() const { return kind == "union"; }
  // A member by name; inside an unnamed struct or union as C names it:
  // an anonymous one's members directly (`ptr`), a named one's as `u.i`.
  const FieldLayout *field(std::string_view name) const;
};

// Sets holes, bit_holes and tail_padding from the fields and the size.
// Members may overlap (unions, a base's reused tail padding): a byte is used
// when any member covers any of its bits.
void compute_holes(RecordLayout &r);

// The number of leading bytes up to and including the named member: the
// hot prefix "everything up to FIELD". nullopt when there is no such member.
std::optional<uint64_t> prefix_through(const RecordLayout &r, std::string_view field);

// Whether a member of this type is written by many threads by design: an
// atomic or a lock. `spelled` is the type as written, `canonical` with the
// typedefs resolved; pointers and references to such types are neither.
SyncKind sync_kind_of_type(std::string_view spelled, std::string_view canonical);

// A member as text names it: an anonymous union or struct is "<anonymous>"
// in the layout, the risks and the advice alike (JSON keeps "").
std::string member_name(const FieldLayout &f);

// A member that only exists to fill space, which nobody reads: its name
// says pad (pad, _pad2, cacheline_padding, ...).
bool is_padding_member(const FieldLayout &f);

// The record's last member when it is an array of no, 0 or 1 elements
// (C's `char data[]`, `Node *next[1]`): storage its objects extend past
// the record's size, allocated at any size from the array's offset on.
// nullptr for any other record (a union's members all start at 0).
const FieldLayout *trailing_array(const RecordLayout &r);

// One place a program allocates a type.
struct AllocSite {
  std::string file;
  uint32_t line = 0, column = 0;
  uint32_t end_line = 0;  // the last line of the allocating expression
  std::string function;   // qualified name of the enclosing function; "" at file scope
  std::string type;       // the allocated type, named like RecordLayout::name when a record
  std::string call;       // new, new[], malloc, calloc, realloc, make_unique, ..., or the callee
  bool dependent = false; // in a template not instantiated here: `type` is as written (T, Node<K>)
  uint32_t variant = 0;   // the type's RecordLayout::variant in the site's translation unit
};

// The standard library's factories an AllocSite's `call` may name (std::
// make_unique, make_shared, ...): their sites allocate inside the library's
// frames. The shared ones (make_shared, allocate_shared) put the object in
// one allocation with its reference counts.
bool is_std_factory(std::string_view call);
bool is_std_shared_factory(std::string_view call);

// Where libstdc++'s make_shared puts an object of `r` in the one block it
// allocates (_Sp_counted_ptr_inplace: a vtable pointer and two counts, then
// the object at its alignment), and that block's size.
uint64_t shared_object_offset(const RecordLayout &r);
uint64_t shared_block_bytes(const RecordLayout &r);

// Whether two layouts of a record are the same: size, alignment and every
// member's name, place, size and kind (lock, atomic), whatever its type's
// spelling (C's and C++'s differ); where and from what they came aside.
bool same_layout(const RecordLayout &a, const RecordLayout &b);

} // namespace memlayout::inspector
