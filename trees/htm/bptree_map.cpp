#include "htm/bptree_map.h"

namespace memlayout::trees::htm {
namespace {

const HtmTreeOptions &checked(const HtmTreeOptions &o) {
  check_tree_options(o);
  return o;
}

} // namespace

BptreeMap::BptreeMap(std::string_view tree, const TreeConfig &config)
    : HtmMap(tree, config.alloc),
      fixed_(config.layout == Layout::kFixed), codec_{checked(config.htm).key_bytes,
                                                      config.htm.value_bytes},
      inner_(InnerShape::make(fixed_, config.htm.node_bytes, config.htm.key_bytes), codec_),
      rt_(resolve_runtime(config.htm.htm)) {}

void BptreeMap::add_node_kinds(uint32_t leaf_bytes) {
  leaf_bytes_ = leaf_bytes;
  leaf_kind_ = records_.add_kind("leaf", leaf_bytes);
  inner_kind_ = records_.add_kind("inner", inner_.shape().bytes);
}

std::vector<ElidedRegion *> BptreeMap::open_regions(std::initializer_list<const char *> names) {
  std::vector<std::string> kinds;
  for (RecordAllocator::Kind k = 0; k < records_.kind_count(); ++k)
    kinds.push_back(records_.kind_name(k));
  sink_ = std::make_unique<AbortSink>(std::move(kinds), &map_);
  std::vector<ElidedRegion *> opened;
  for (const char *name : names) {
    auto region =
        std::make_unique<ElidedRegion>(records_.tree() + "." + name, lock_, rt_, sink_.get());
    opened.push_back(region.get());
    regions_.emplace_back(name, std::move(region));
  }
  return opened;
}

uint8_t *BptreeMap::fresh_leaf(void *p) {
  auto *leaf = static_cast<uint8_t *>(p);
  zero_record(leaf, leaf_bytes_);
  map_.add(leaf, leaf_bytes_, leaf_kind_);
  return leaf;
}

uint8_t *BptreeMap::fresh_inner(void *p) {
  auto *inner = static_cast<uint8_t *>(p);
  inner_.init(inner);
  map_.add(inner, inner_.shape().bytes, inner_kind_);
  return inner;
}

void BptreeMap::refill_node_spares() {
  spare_leaves_.fill(1, alloc_leaf_);
  spare_inners_.fill(__atomic_load_n(&hdr_.height, __ATOMIC_RELAXED) + 2, alloc_inner_);
}

void BptreeMap::free_nodes(const std::function<void(uint8_t *leaf)> &free_leaf_parts) {
  inner_.free_all(
      hdr_.root, hdr_.height,
      [&](uint8_t *leaf) {
        if (free_leaf_parts)
          free_leaf_parts(leaf);
        records_.deallocate(leaf_kind_, leaf);
      },
      [&](uint8_t *inner) { records_.deallocate(inner_kind_, inner); });
  for (uint8_t *p : spare_leaves_.drain())
    records_.deallocate(leaf_kind_, p);
  for (uint8_t *p : spare_inners_.drain())
    records_.deallocate(inner_kind_, p);
  map_.clear();
}

void BptreeMap::for_each(const std::function<void(Key, Value)> &visit) const {
  uint8_t *n = hdr_.root;
  for (uint32_t d = 0; d < hdr_.height; ++d)
    n = *inner_.shape().child_slot(n, 0);
  for (; n; n = next_leaf(n))
    visit_leaf(n, visit);
}

std::string BptreeMap::check_structure() const {
  StructureErrors errors;
  std::string inner_errors;
  std::vector<uint8_t *> leaves; // in key order, as the tree reaches them
  inner_.walk(
      hdr_.root, hdr_.height,
      [&](uint8_t *leaf, Key lo, Key hi) {
        leaves.push_back(leaf);
        check_leaf(leaf, lo, hi, errors);
      },
      inner_errors);
  if (!inner_errors.empty())
    errors.add(inner_errors);
  check_leaf_chain(
      leaves, [&](uint8_t *n) { return next_leaf(n); }, errors);
  if (lock_.held())
    errors.add("the fallback lock is held");
  return errors.report();
}

HtmReport BptreeMap::htm_report() const {
  HtmReport r;
  r.backend = backend_name(rt_.backend);
  for (const auto &[name, region] : regions_) {
    HtmCounts c = region->counts();
    r.counts += c;
    r.regions.emplace_back(name, c);
  }
  if (rt_.backend == Backend::kEmulate) {
    r.kinds = sink_->kinds();
    r.l1 = l1_model_text(rt_.l1);
  }
  return r;
}

void BptreeMap::reset_htm_stats() {
  for (const auto &[name, region] : regions_)
    region->reset_counts();
  sink_->reset();
}

} // namespace memlayout::trees::htm
