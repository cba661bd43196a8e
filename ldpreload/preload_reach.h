// Whether the dynamic loader will load the recorder into a program: one
// definition for the launcher (which says why a command left no trace, and
// refuses a 32-bit one) and the recorder (which notes the programs a
// recorded process starts that it cannot follow). No allocation: the
// recorder calls it before an exec.
#pragma once

#include <cstdint>
#include <cstring>
#include <elf.h>
#include <sys/stat.h>
#include <sys/types.h>

namespace memlayout::preload {

enum class ElfKind { kNotElf, kElf64Dynamic, kElf64Static, kElf32 };

// `read_at(buf, n, offset)` reads up to n bytes of the file at offset and
// returns how many. Static: an ELF64 program without PT_INTERP (static-pie
// too), which no dynamic loader runs.
template <typename ReadAt> ElfKind elf_kind(ReadAt &&read_at) {
  Elf64_Ehdr eh;
  if (read_at(&eh, sizeof eh.e_ident, 0) != static_cast<long>(sizeof eh.e_ident) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return ElfKind::kNotElf;
  if (eh.e_ident[EI_CLASS] == ELFCLASS32)
    return ElfKind::kElf32;
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      read_at(&eh, sizeof eh, 0) != static_cast<long>(sizeof eh))
    return ElfKind::kNotElf;
  for (uint16_t i = 0; i < eh.e_phnum && eh.e_phentsize >= sizeof(uint32_t); ++i) {
    uint32_t type = 0;
    if (read_at(&type, sizeof type, eh.e_phoff + uint64_t{i} * eh.e_phentsize) !=
        static_cast<long>(sizeof type))
      break;
    if (type == PT_INTERP) // the dynamic loader, which reads LD_PRELOAD
      return ElfKind::kElf64Dynamic;
  }
  return ElfKind::kElf64Static;
}

// Set-user-ID or set-group-ID to someone other than the caller: the loader
// runs it in secure mode, which ignores LD_PRELOAD's paths.
inline bool runs_in_secure_mode(const struct stat &st, uid_t uid, gid_t gid) {
  return ((st.st_mode & S_ISUID) && st.st_uid != uid) ||
         ((st.st_mode & S_ISGID) && st.st_gid != gid);
}

} // namespace memlayout::preload
