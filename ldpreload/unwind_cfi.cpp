#include "unwind_cfi.h"

#include <cstring>

namespace memlayout::preload::cfi {
namespace {

// DWARF / LSB constants (DWARF 5 section 6.4.2, LSB "Exception Frames").
constexpr uint8_t kPeOmit = 0xff;
constexpr uint8_t kPeDatarelSdata4 = 0x3b;
constexpr uint64_t kRegRbp = 6;
constexpr uint64_t kRegRsp = 7;
constexpr uint64_t kRegRip = 16;

// Bounded little-endian cursor: an overrun clears `ok` and every later read
// yields 0, so parsers check `ok` once per structure instead of per field.
struct Reader {
  const uint8_t *p;
  const uint8_t *end;
  bool ok = true;

  Reader(uintptr_t lo, uintptr_t hi)
      : p(reinterpret_cast<const uint8_t *>(lo)), end(reinterpret_cast<const uint8_t *>(hi)) {}
  Reader(const uint8_t *lo, size_t n) : p(lo), end(lo + n) {}

  uintptr_t pos() const { return reinterpret_cast<uintptr_t>(p); }
  bool have(size_t n) {
    if (ok && static_cast<size_t>(end - p) >= n)
      return true;
    ok = false;
    return false;
  }
  template <typename T> T fixed() {
    T v{};
    if (have(sizeof(T))) {
      memcpy(&v, p, sizeof(T)); // unaligned-safe; compiles to one load
      p += sizeof(T);
    }
    return v;
  }
  uint8_t u8() { return fixed<uint8_t>(); }
  uint64_t uleb() {
    uint64_t v = 0;
    for (unsigned shift = 0; have(1); shift += 7) {
      uint8_t b = *p++;
      if (shift < 64)
        v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80))
        return v;
    }
    return 0;
  }
  int64_t sleb() {
    uint64_t v = 0;
    unsigned shift = 0;
    while (have(1)) {
      uint8_t b = *p++;
      if (shift < 64)
        v |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) {
        if (shift < 64 && (b & 0x40))
          v |= ~uint64_t{0} << shift;
        return static_cast<int64_t>(v);
      }
    }
    return 0;
  }
  void skip(uint64_t n) {
    if (have(n))
      p += n;
  }
};

// Reads a DW_EH_PE_* encoded value. `datarel` is the base for DW_EH_PE_datarel
// (the .eh_frame_hdr start; 0 where datarel is meaningless). Indirect, textrel,
// funcrel and aligned never describe code ranges on x86-64 Linux: rejected.
bool read_encoded(Reader &r, uint8_t enc, uintptr_t datarel, uintptr_t *out) {
  if (enc == kPeOmit || (enc & 0x80))
    return false;
  uintptr_t field = r.pos();
  uint64_t v;
  switch (enc & 0x0f) {
  case 0x00: // absptr
  case 0x04: // udata8
  case 0x0c: // sdata8
    v = r.fixed<uint64_t>();
    break;
  case 0x01:
    v = r.uleb();
    break;
  case 0x02:
    v = r.fixed<uint16_t>();
    break;
  case 0x03:
    v = r.fixed<uint32_t>();
    break;
  case 0x09:
    v = static_cast<uint64_t>(r.sleb());
    break;
  case 0x0a:
    v = static_cast<uint64_t>(static_cast<int64_t>(r.fixed<int16_t>()));
    break;
  case 0x0b:
    v = static_cast<uint64_t>(static_cast<int64_t>(r.fixed<int32_t>()));
    break;
  default:
    return false;
  }
  switch (enc & 0x70) {
  case 0x00:
    break;
  case 0x10: // pcrel
    v += field;
    break;
  case 0x30: // datarel
    if (!datarel)
      return false;
    v += datarel;
    break;
  default:
    return false;
  }
  *out = v;
  return r.ok;
}

// Skips an encoded value without interpreting it (the personality pointer).
bool skip_encoded(Reader &r, uint8_t enc) {
  if (enc == kPeOmit)
    return true;
  switch (enc & 0x0f) {
  case 0x00:
  case 0x04:
  case 0x0c:
    r.skip(8);
    break;
  case 0x01:
    r.uleb();
    break;
  case 0x09:
    r.sleb();
    break;
  case 0x02:
  case 0x0a:
    r.skip(2);
    break;
  case 0x03:
  case 0x0b:
    r.skip(4);
    break;
  default:
    return false;
  }
  return (enc & 0x70) != 0x50 && r.ok; // aligned would need the section base
}

struct Cie {
  uint64_t caf = 1;
  int64_t daf = -8;
  uint64_t ra_reg = kRegRip;
  uint8_t fde_enc = 0; // absptr unless 'R' says otherwise
  bool has_z = false;
  bool signal = false;
  const uint8_t *insns = nullptr;
  size_t insns_len = 0;
};

// An .eh_frame entry's bounds: [body, end) after the length word.
struct Entry {
  uintptr_t body = 0, end = 0;
};

bool read_entry(const ModuleImage &m, uintptr_t at, Entry *e) {
  if (!m.readable(at, 4))
    return false;
  uint32_t len;
  memcpy(&len, reinterpret_cast<const void *>(at), 4);
  // 0 terminates .eh_frame; 64-bit lengths never occur in practice and libgcc
  // ignores them too.
  if (len == 0 || len == 0xffffffffu || !m.readable(at, size_t{len} + 4))
    return false;
  e->body = at + 4;
  e->end = at + 4 + len;
  return true;
}

bool parse_cie(const ModuleImage &m, uintptr_t at, Cie *c) {
  Entry e;
  if (!read_entry(m, at, &e))
    return false;
  Reader r(e.body, e.end);
  if (r.fixed<uint32_t>() != 0) // CIE id in .eh_frame
    return false;
  uint8_t version = r.u8();
  if (version != 1 && version != 3 && version != 4)
    return false;
  const uint8_t *aug = r.p;
  while (r.have(1) && *r.p)
    ++r.p;
  r.skip(1);
  if (!r.ok)
    return false;
  if (aug[0] && aug[0] != 'z')
    return false; // pre-'z' augmentations ("eh") have no skippable length
  if (version == 4) {
    if (r.u8() != 8 || r.u8() != 0) // address size, segment selector size
      return false;
  }
  c->caf = r.uleb();
  c->daf = r.sleb();
  c->ra_reg = version == 1 ? r.u8() : r.uleb();
  if (aug[0] == 'z') {
    c->has_z = true;
    uint64_t len = r.uleb();
    if (!r.have(len))
      return false;
    Reader a(r.p, len);
    for (const uint8_t *ch = aug + 1; *ch; ++ch) {
      switch (*ch) {
      case 'R':
        c->fde_enc = a.u8();
        break;
      case 'P':
        if (!skip_encoded(a, a.u8()))
          return false;
        break;
      case 'L':
        a.u8();
        break;
      case 'S':
        c->signal = true;
        break;
      case 'B': // AArch64 B-key, MTE tagging: no data
      case 'G':
        break;
      default:
        return false; // unknown data size: later letters could not be found
      }
    }
    if (!a.ok)
      return false;
    r.p += len;
  }
  if (!r.ok)
    return false;
  c->insns = r.p;
  c->insns_len = static_cast<size_t>(r.end - r.p);
  return true;
}

// A parsed FDE: its code range and instructions, with its CIE.
struct Fde {
  Cie cie;
  uintptr_t pc_begin = 0, pc_end = 0;
  const uint8_t *insns = nullptr;
  size_t insns_len = 0;
};

// Parses the FDE at `at`; false for CIEs, terminators and malformed entries.
bool parse_fde(const ModuleImage &m, uintptr_t at, Fde *f) {
  Entry e;
  if (!read_entry(m, at, &e))
    return false;
  Reader r(e.body, e.end);
  uint32_t cie_delta = r.fixed<uint32_t>();
  if (!r.ok || cie_delta == 0 || cie_delta > e.body)
    return false;
  if (!parse_cie(m, e.body - cie_delta, &f->cie))
    return false;
  uintptr_t begin, range;
  if (!read_encoded(r, f->cie.fde_enc, 0, &begin) ||
      !read_encoded(r, f->cie.fde_enc & 0x0f, 0, &range))
    return false;
  if (f->cie.has_z)
    r.skip(r.uleb());
  if (!r.ok)
    return false;
  f->pc_begin = begin;
  f->pc_end = begin + range;
  f->insns = r.p;
  f->insns_len = static_cast<size_t>(r.end - r.p);
  return true;
}

// Finds the FDE covering `target` through the .eh_frame_hdr binary search
// table, or by walking .eh_frame when a linker left the table out.
bool find_fde(const ModuleImage &m, uintptr_t target, Fde *out) {
  const uintptr_t hdr = m.eh_frame_hdr;
  if (!hdr || !m.readable(hdr, m.eh_frame_hdr_size))
    return false;
  Reader r(hdr, hdr + m.eh_frame_hdr_size);
  uint8_t version = r.u8();
  uint8_t ptr_enc = r.u8();
  uint8_t count_enc = r.u8();
  uint8_t table_enc = r.u8();
  uintptr_t eh_frame = 0;
  if (version != 1 || !read_encoded(r, ptr_enc, hdr, &eh_frame))
    return false;
  uintptr_t count = 0;
  if (count_enc != kPeOmit && table_enc == kPeDatarelSdata4 &&
      read_encoded(r, count_enc, hdr, &count)) {
    if (count == 0 || !r.have(count * 8))
      return false;
    const uint8_t *table = r.p;
    auto initial = [&](uintptr_t i) {
      int32_t v;
      memcpy(&v, table + i * 8, 4);
      return hdr + static_cast<intptr_t>(v);
    };
    // Last entry whose initial location is <= target.
    uintptr_t lo = 0, hi = count;
    while (hi - lo > 1) {
      uintptr_t mid = lo + (hi - lo) / 2;
      if (initial(mid) <= target)
        lo = mid;
      else
        hi = mid;
    }
    if (initial(lo) > target)
      return false;
    int32_t fde_off;
    memcpy(&fde_off, table + lo * 8 + 4, 4);
    return parse_fde(m, hdr + static_cast<intptr_t>(fde_off), out) && out->pc_begin <= target &&
           target < out->pc_end;
  }
  // No table: walk the entries. Bounded so that a missing terminator costs a
  // stop, not a hang.
  uintptr_t at = eh_frame;
  for (int i = 0; i < (1 << 20); ++i) {
    Entry e;
    if (!read_entry(m, at, &e))
      return false;
    uint32_t id;
    memcpy(&id, reinterpret_cast<const void *>(e.body), 4);
    if (id != 0 && parse_fde(m, at, out) && out->pc_begin <= target && target < out->pc_end)
      return true;
    at = e.end;
  }
  return false;
}

// Register rules for the three registers the unwinder follows.
struct RegRule {
  enum How : uint8_t { kSame, kUndefined, kOffset, kValOffset, kOther };
  How how = kSame;
  int64_t off = 0;
};

struct Row {
  uint64_t cfa_reg = kRegRsp;
  int64_t cfa_off = 0;
  bool cfa_expr = false;
  bool ra_set = false;
  RegRule rbp, rsp, ra;
};

class Interpreter {
public:
  Interpreter(uint64_t caf, int64_t daf, uint64_t ra_reg) : caf_(caf), daf_(daf), ra_reg_(ra_reg) {}

  // Runs `insns` until the row that covers `target`; false on anything it
  // cannot decode. CIE programs run with target = max.
  bool run(const uint8_t *insns, size_t len, uintptr_t loc, uintptr_t target, uint8_t fde_enc) {
    Reader r(insns, len);
    while (r.ok && r.p < r.end) {
      uint8_t op = r.u8();
      uint8_t low = op & 0x3f;
      uint64_t delta = 0;
      bool advance = false;
      switch (op >> 6) {
      case 1: // DW_CFA_advance_loc
        delta = low;
        advance = true;
        break;
      case 2: // DW_CFA_offset
        set(low, {RegRule::kOffset, static_cast<int64_t>(r.uleb()) * daf_});
        break;
      case 3: // DW_CFA_restore
        restore(low);
        break;
      default:
        switch (op) {
        case 0x00: // nop
          break;
        case 0x01: { // set_loc
          uintptr_t to;
          if (!read_encoded(r, fde_enc, 0, &to))
            return false;
          if (to > target)
            return true;
          loc = to;
          break;
        }
        case 0x02:
          delta = r.u8();
          advance = true;
          break;
        case 0x03:
          delta = r.fixed<uint16_t>();
          advance = true;
          break;
        case 0x04:
          delta = r.fixed<uint32_t>();
          advance = true;
          break;
        case 0x05: { // offset_extended
          uint64_t reg = r.uleb();
          set(reg, {RegRule::kOffset, static_cast<int64_t>(r.uleb()) * daf_});
          break;
        }
        case 0x06: // restore_extended
          restore(r.uleb());
          break;
        case 0x07: // undefined
          set(r.uleb(), {RegRule::kUndefined, 0});
          break;
        case 0x08: // same_value
          set(r.uleb(), {RegRule::kSame, 0});
          break;
        case 0x09: { // register
          uint64_t reg = r.uleb();
          uint64_t from = r.uleb();
          set(reg, {reg == from ? RegRule::kSame : RegRule::kOther, 0});
          break;
        }
        case 0x0a: // remember_state: CFA included, as GCC's code expects
          if (depth_ == kMaxDepth)
            return false;
          stack_[depth_++] = row_;
          break;
        case 0x0b: // restore_state
          if (depth_ == 0)
            return false;
          row_ = stack_[--depth_];
          break;
        case 0x0c: // def_cfa
          row_.cfa_reg = r.uleb();
          row_.cfa_off = static_cast<int64_t>(r.uleb());
          row_.cfa_expr = false;
          break;
        case 0x0d: // def_cfa_register
          row_.cfa_reg = r.uleb();
          row_.cfa_expr = false;
          break;
        case 0x0e: // def_cfa_offset
          row_.cfa_off = static_cast<int64_t>(r.uleb());
          row_.cfa_expr = false;
          break;
        case 0x0f: // def_cfa_expression
          row_.cfa_expr = true;
          r.skip(r.uleb());
          break;
        case 0x10: { // expression
          uint64_t reg = r.uleb();
          r.skip(r.uleb());
          set(reg, {RegRule::kOther, 0});
          break;
        }
        case 0x11: { // offset_extended_sf
          uint64_t reg = r.uleb();
          set(reg, {RegRule::kOffset, r.sleb() * daf_});
          break;
        }
        case 0x12: // def_cfa_sf
          row_.cfa_reg = r.uleb();
          row_.cfa_off = r.sleb() * daf_;
          row_.cfa_expr = false;
          break;
        case 0x13: // def_cfa_offset_sf
          row_.cfa_off = r.sleb() * daf_;
          row_.cfa_expr = false;
          break;
        case 0x14: { // val_offset
          uint64_t reg = r.uleb();
          set(reg, {RegRule::kValOffset, static_cast<int64_t>(r.uleb()) * daf_});
          break;
        }
        case 0x15: { // val_offset_sf
          uint64_t reg = r.uleb();
          set(reg, {RegRule::kValOffset, r.sleb() * daf_});
          break;
        }
        case 0x16: { // val_expression
          uint64_t reg = r.uleb();
          r.skip(r.uleb());
          set(reg, {RegRule::kOther, 0});
          break;
        }
        case 0x2e: // GNU_args_size: matters to landing pads, not to unwinding
          r.uleb();
          break;
        case 0x2f: { // GNU_negative_offset_extended
          uint64_t reg = r.uleb();
          set(reg, {RegRule::kOffset, -static_cast<int64_t>(r.uleb()) * daf_});
          break;
        }
        default:
          return false;
        }
      }
      if (advance) {
        uint64_t to = loc + delta * caf_;
        if (to > target)
          return true;
        loc = to;
      }
    }
    return r.ok;
  }

  void snapshot_initial() { initial_ = row_; }
  const Row &row() const { return row_; }

private:
  static constexpr int kMaxDepth = 8;

  void set(uint64_t reg, RegRule rule) {
    if (reg == kRegRbp)
      row_.rbp = rule;
    else if (reg == kRegRsp)
      row_.rsp = rule;
    if (reg == ra_reg_) {
      row_.ra = rule;
      row_.ra_set = true;
    }
  }
  void restore(uint64_t reg) {
    if (reg == kRegRbp)
      row_.rbp = initial_.rbp;
    else if (reg == kRegRsp)
      row_.rsp = initial_.rsp;
    if (reg == ra_reg_) {
      row_.ra = initial_.ra;
      row_.ra_set = initial_.ra_set;
    }
  }

  uint64_t caf_;
  int64_t daf_;
  uint64_t ra_reg_;
  Row row_, initial_;
  Row stack_[kMaxDepth];
  int depth_ = 0;
};

Rule end_rule() {
  Rule r;
  r.kind = Rule::kEnd;
  return r;
}

Rule to_rule(const Row &row) {
  if (row.cfa_expr || (row.cfa_reg != kRegRsp && row.cfa_reg != kRegRbp))
    return end_rule(); // PLT stubs, signal trampolines, DRAP realignment
  if (row.cfa_off < INT32_MIN || row.cfa_off > INT32_MAX)
    return end_rule();
  // Return address at CFA - 8 and caller rsp == CFA: anything else (or an
  // undefined return address, which marks the outermost frame) ends the walk.
  if (!row.ra_set || row.ra.how != RegRule::kOffset || row.ra.off != -8)
    return end_rule();
  if (row.rsp.how != RegRule::kSame && !(row.rsp.how == RegRule::kValOffset && row.rsp.off == 0))
    return end_rule();
  Rule r;
  r.kind = Rule::kStep;
  r.cfa_base = row.cfa_reg == kRegRbp ? Rule::kCfaRbp : Rule::kCfaRsp;
  r.cfa_off = static_cast<int32_t>(row.cfa_off);
  switch (row.rbp.how) {
  case RegRule::kSame:
    r.rbp = Rule::kRbpSame;
    break;
  case RegRule::kOffset:
    // Packed as a signed byte of 8-byte slots; an odd placement is dropped
    // (rbp becomes unknown) rather than guessed.
    if (row.rbp.off % 8 == 0 && row.rbp.off >= -1024 && row.rbp.off <= 1016) {
      r.rbp = Rule::kRbpSaved;
      r.rbp_off = static_cast<int32_t>(row.rbp.off);
    } else {
      r.rbp = Rule::kRbpLost;
    }
    break;
  default:
    r.rbp = Rule::kRbpLost;
    break;
  }
  return r;
}

} // namespace

bool ModuleImage::readable(uintptr_t addr, size_t n) const {
  for (int i = 0; i < nloads; ++i) {
    if (addr >= loads[i].lo && addr <= loads[i].hi && n <= loads[i].hi - addr)
      return true;
  }
  return false;
}

Rule rule_from_programs(const uint8_t *cie_insns, size_t cie_len, const uint8_t *fde_insns,
                        size_t fde_len, uintptr_t pc_begin, uintptr_t target) {
  Interpreter in(1, -8, kRegRip);
  if (!in.run(cie_insns, cie_len, 0, UINTPTR_MAX, 0))
    return end_rule();
  in.snapshot_initial();
  if (!in.run(fde_insns, fde_len, pc_begin, target, 0))
    return end_rule();
  return to_rule(in.row());
}

Rule rule_for(const ModuleImage &m, uintptr_t ra) {
  const uintptr_t target = ra - 1; // the call instruction, not what follows it
  Fde f;
  if (!find_fde(m, target, &f) || f.cie.signal)
    return end_rule();
  Interpreter in(f.cie.caf, f.cie.daf, f.cie.ra_reg);
  if (!in.run(f.cie.insns, f.cie.insns_len, 0, UINTPTR_MAX, f.cie.fde_enc))
    return end_rule();
  in.snapshot_initial();
  if (!in.run(f.insns, f.insns_len, f.pc_begin, target, f.cie.fde_enc))
    return end_rule();
  return to_rule(in.row());
}

} // namespace memlayout::preload::cfi
