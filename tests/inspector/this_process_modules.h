// The module list the recorder would write for this (test) process, for
// tests that symbolize their own code.
#pragma once

#include "trace_reader.h"

#include <cstring>
#include <elf.h>
#include <link.h>
#include <vector>

namespace memlayout::testing {

inline std::vector<inspector::ModuleEntry> this_process_modules() {
  std::vector<inspector::ModuleEntry> mods;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        inspector::ModuleEntry m;
        m.load_bias = info->dlpi_addr;
        m.path = info->dlpi_name ? info->dlpi_name : "";
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr) &ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD)
            m.segments.push_back(
                {ph.p_vaddr, ph.p_memsz, static_cast<uint8_t>(ph.p_flags & (PF_X | PF_W | PF_R))});
          if (ph.p_type != PT_NOTE)
            continue;
          const char *p = reinterpret_cast<const char *>(info->dlpi_addr + ph.p_vaddr);
          const char *end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto *n = reinterpret_cast<const ElfW(Nhdr) *>(p);
            const char *name = p + sizeof *n;
            const char *desc = name + ((n->n_namesz + 3) & ~3u);
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !std::memcmp(name, "GNU", 4))
              m.build_id.assign(desc, n->n_descsz);
            p = desc + ((n->n_descsz + 3) & ~3u);
          }
        }
        static_cast<std::vector<inspector::ModuleEntry> *>(data)->push_back(std::move(m));
        return 0;
      },
      &mods);
  return mods;
}

} // namespace memlayout::testing
