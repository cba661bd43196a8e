// One factory per tree, defined in the tree's own .cpp; registry.cpp lists them.
#pragma once

#include "map.h"

namespace memlayout::trees {

// A tree class template instantiated with the layout the config asks for:
//   make_in_layout<Citrus, CitrusBaselineLayout, CitrusFixedLayout>(config)
template <template <class> class Tree, class BaselineLayout, class FixedLayout>
std::unique_ptr<ConcurrentMap> make_in_layout(const TreeConfig &config) {
  if (config.layout == Layout::kFixed)
    return std::make_unique<Tree<FixedLayout>>(config.alloc);
  return std::make_unique<Tree<BaselineLayout>>(config.alloc);
}

std::unique_ptr<ConcurrentMap> make_occ_avl(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_log_int(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_citrus(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_int_lf(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_edge_int_lf(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_edge_ext_lf(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_ticket(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_ext_lf(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_htm_bptree(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_euno_bptree(const TreeConfig &);

} // namespace memlayout::trees
