// The table of trees the harness, ycsb-lite and the tests iterate over.
// One line per tree, in the design's order:
//   occ-avl log-int citrus int-lf edge-int-lf edge-ext-lf ticket ext-lf,
//   then the HTM trees htm-bptree euno-bptree
// A tree's line goes in when its .cpp is part of memlayout_trees.
#include "map.h"
#include "tree_factories.h"

namespace memlayout::trees {

const std::vector<TreeInfo> &all_trees() {
  static const std::vector<TreeInfo> trees = {
      {"occ-avl", "Bronson et al. relaxed AVL: optimistic versions, partially external",
       make_occ_avl},
      {"log-int", "Drachsler et al. logical ordering: pred/succ list under an internal BST",
       make_log_int},
      {"citrus", "Arbel & Attiya internal BST: RCU readers, locking updaters", make_citrus},
      {"int-lf", "Howley & Jones lock-free internal BST, operation descriptors", make_int_lf},
      {"edge-int-lf", "Ramachandran & Mittal lock-free internal BST, edge marking",
       make_edge_int_lf},
      {"edge-ext-lf", "Natarajan & Mittal lock-free external BST, edge marking", make_edge_ext_lf},
      {"ticket", "David et al. BST-TK: external BST, versioned try-locks", make_ticket},
      {"ext-lf", "Ellen et al. lock-free external BST, info records", make_ext_lf},
      {"htm-bptree", "B+tree, every operation one HTM transaction over a fallback lock (DBX)",
       make_htm_bptree},
      {"euno-bptree", "Eunomia's Euno-B+Tree: split HTM regions, scattered leaves, conflict control",
       make_euno_bptree},
  };
  return trees;
}

const TreeInfo *find_tree(std::string_view name) {
  for (const TreeInfo &t : all_trees())
    if (t.name == name)
      return &t;
  return nullptr;
}

} // namespace memlayout::trees
