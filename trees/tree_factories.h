// One factory per tree, defined in the tree's own .cpp; registry.cpp lists them.
#pragma once

#include "map.h"

namespace memlayout::trees {

std::unique_ptr<ConcurrentMap> make_occ_avl(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_log_int(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_citrus(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_int_lf(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_edge_int_lf(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_edge_ext_lf(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_ticket(const TreeConfig &);
std::unique_ptr<ConcurrentMap> make_ext_lf(const TreeConfig &);

} // namespace memlayout::trees
