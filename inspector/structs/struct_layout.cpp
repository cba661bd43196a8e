#include "struct_layout.h"

#include <cstring>

#include "layout_advice.h"

#include <clang/AST/ASTContext.h>
#include <clang/AST/Attr.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/RecordLayout.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Basic/TargetInfo.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace memlayout::inspector {
namespace {

clang::PrintingPolicy name_policy(const clang::ASTContext &ctx) {
  clang::PrintingPolicy p(ctx.getLangOpts());
  p.SuppressTagKeyword = true;
  p.FullyQualifiedName = true;
  p.SuppressScope = false;
  return p;
}

clang::PrintingPolicy member_type_policy(const clang::ASTContext &ctx) {
  clang::PrintingPolicy p(ctx.getLangOpts());
  p.SuppressScope = false;
  return p;
}

// Whether ASTRecordLayout may be asked about the record: it asserts on
// anything incomplete, dependent or invalid, which code with errors has.
bool layout_computable(const clang::RecordDecl &rd) {
  if (rd.isInvalidDecl() || !rd.isCompleteDefinition() || rd.isDependentType())
    return false;
  for (const clang::FieldDecl *f : rd.fields()) {
    if (f->isInvalidDecl())
      return false;
    clang::QualType t = f->getType();
    if (t->isDependentType() || (t->isIncompleteType() && !t->isIncompleteArrayType()))
      return false;
  }
  if (const auto *cxx = llvm::dyn_cast<clang::CXXRecordDecl>(&rd))
    for (const clang::CXXBaseSpecifier &b : cxx->bases()) {
      const clang::CXXRecordDecl *base = b.getType()->getAsCXXRecordDecl();
      if (!base || !layout_computable(*base))
        return false;
    }
  return true;
}

FieldLayout base_member(const clang::CXXRecordDecl &base, uint64_t offset, FieldRole role,
                        const clang::ASTContext &ctx) {
  const clang::ASTRecordLayout &bl = ctx.getASTRecordLayout(&base);
  FieldLayout f;
  f.name = record_name(base, ctx);
  f.type = f.name;
  f.offset = offset;
  f.size = static_cast<uint64_t>(bl.getNonVirtualSize().getQuantity());
  f.align = static_cast<uint64_t>(bl.getNonVirtualAlignment().getQuantity());
  f.role = role;
  return f;
}

// What a member of record type holds: a lock anywhere inside it (a struct
// guard around a pthread_mutex_t, the study's row locks inside a larger
// record) makes the member a lock; else an atomic makes it an atomic.
SyncKind contained_sync(clang::QualType t, clang::ASTContext &ctx, int depth) {
  const clang::Type *element = t->getBaseElementTypeUnsafe();
  const clang::RecordDecl *rd = element ? element->getAsRecordDecl() : nullptr;
  if (!rd || depth > 8 || !(rd = rd->getDefinition()))
    return SyncKind::kNone;
  SyncKind found = SyncKind::kNone;
  auto take = [&](clang::QualType inner) {
    SyncKind k = sync_kind_of_type(inner.getAsString(member_type_policy(ctx)),
                                   inner.getCanonicalType().getAsString(member_type_policy(ctx)));
    if (k == SyncKind::kNone)
      k = contained_sync(inner, ctx, depth + 1);
    if (k == SyncKind::kLock || (k == SyncKind::kAtomic && found == SyncKind::kNone))
      found = k;
  };
  if (const auto *cxx = llvm::dyn_cast<clang::CXXRecordDecl>(rd))
    for (const clang::CXXBaseSpecifier &base : cxx->bases())
      take(base.getType());
  for (const clang::FieldDecl *fd : rd->fields())
    take(fd->getType());
  return found;
}

// An unnamed struct inside another type (`struct { long x, y; } res[3]`, a
// pointer to one): clang spells it "struct (unnamed struct at FILE:L:C)",
// pahole and these docs `struct {...}`.
std::string unnamed_spelled_plainly(std::string name) {
  for (const char *how : {"(unnamed ", "(anonymous "})
    for (size_t at; (at = name.find(how)) != std::string::npos;) {
      size_t kind = at + std::strlen(how), space = name.find(' ', kind),
             close = name.find(')', kind);
      if (space == std::string::npos || close == std::string::npos)
        return name;
      std::string tag = name.substr(kind, space - kind); // struct, union, enum, class
      size_t from = at;
      if (from >= tag.size() + 1 &&
          name.compare(from - tag.size() - 1, tag.size() + 1, tag + " ") == 0)
        from -= tag.size() + 1;
      name.replace(from, close + 1 - from, tag + " {...}");
    }
  return name;
}

FieldLayout data_member(const clang::FieldDecl &fd, uint64_t bit_offset, clang::ASTContext &ctx) {
  FieldLayout f;
  f.name = fd.getNameAsString();
  clang::QualType t = fd.getType();
  const clang::RecordDecl *inner = t->getAsRecordDecl();
  if (inner && record_name(*inner, ctx).empty())
    f.type = inner->isUnion() ? "union {...}" : "struct {...}"; // not its source location
  else
    f.type = unnamed_spelled_plainly(t.getAsString(member_type_policy(ctx)));
  // A bit-field's own alignment is that of where its bits happen to start
  // (0 off a byte boundary): its storage unit's, its type's, is what packs.
  f.align = static_cast<uint64_t>(
      (fd.isBitField() ? ctx.getTypeAlignInChars(t) : ctx.getDeclAlign(&fd)).getQuantity());
  if (fd.isBitField()) {
    const unsigned width = fd.getBitWidthValue(ctx);
    f.bit_offset = static_cast<uint32_t>(bit_offset);
    f.bit_size = width;
    f.offset = bit_offset / 8;
    f.size = (bit_offset + width + 7) / 8 - f.offset;
  } else {
    f.offset = bit_offset / 8;
    // A [[no_unique_address]] member takes only its data size: the members
    // after it may live in its tail padding, as in a base's.
    if (!t->isIncompleteArrayType() && !fd.isZeroSize(ctx))
      f.size = static_cast<uint64_t>((fd.hasAttr<clang::NoUniqueAddressAttr>()
                                          ? ctx.getTypeInfoDataSizeInChars(t).Width
                                          : ctx.getTypeSizeInChars(t))
                                         .getQuantity());
  }
  if (inner && record_name(*inner, ctx).empty() && inner->getDefinition()) {
    // Unnamed type: its members inline, as pahole shows them.
    const clang::RecordDecl *def = inner->getDefinition();
    const clang::ASTRecordLayout &l = ctx.getASTRecordLayout(def);
    f.nested = def->isUnion() ? "union" : "struct";
    for (const clang::FieldDecl *sub : def->fields()) {
      if (sub->isBitField() && sub->getBitWidthValue(ctx) == 0)
        continue;
      f.members.push_back(
          data_member(*sub, bit_offset + l.getFieldOffset(sub->getFieldIndex()), ctx));
    }
  }
  f.sync = sync_kind_of_type(f.type, t.getCanonicalType().getAsString(member_type_policy(ctx)));
  // Only where the member is one line at most: the risks judge a member's
  // whole extent, and a lock at the start of a large one is not near its end.
  if (f.sync == SyncKind::kNone && f.size <= 64)
    f.sync = contained_sync(t, ctx, 0);
  return f;
}

} // namespace

namespace {

// The function a local class is declared in, as the demangler names the
// class's scope: "ns::Tree::scan(long)", "ns::walk<long>(long)". nullptr
// for a class at namespace or class scope.
const clang::FunctionDecl *enclosing_function(const clang::RecordDecl &rd) {
  for (const clang::DeclContext *dc = rd.getDeclContext(); dc; dc = dc->getParent())
    if (const auto *fd = llvm::dyn_cast<clang::FunctionDecl>(dc))
      return fd;
  return nullptr;
}

std::string function_scope(const clang::FunctionDecl &fd, const clang::ASTContext &ctx) {
  std::string name;
  llvm::raw_string_ostream out(name);
  clang::PrintingPolicy policy = name_policy(ctx);
  policy.SuppressUnwrittenScope = true;
  fd.getNameForDiagnostic(out, policy, /*Qualified=*/true);
  out << '(';
  for (unsigned i = 0; i < fd.getNumParams(); ++i)
    out << (i ? ", " : "") << fd.getParamDecl(i)->getType().getAsString(policy);
  out << ')';
  return out.str();
}

} // namespace

std::string record_name(const clang::RecordDecl &rd, const clang::ASTContext &ctx) {
  if (rd.getDeclName().isEmpty()) {
    if (const clang::TypedefNameDecl *td = rd.getTypedefNameForAnonDecl())
      return td->getQualifiedNameAsString();
    return {};
  }
  std::string name;
  if (const auto *spec = llvm::dyn_cast<clang::ClassTemplateSpecializationDecl>(&rd)) {
    // Every template argument, as printed for its members' scope: the
    // type's printing follows an explicit instantiation's spelling
    // (`template struct Table<int>;` made Table<int, 4> "Table<int>").
    llvm::raw_string_ostream out(name);
    spec->getNameForDiagnostic(out, name_policy(ctx), /*Qualified=*/true);
    out.flush();
  } else {
    name = ctx.getRecordType(&rd).getAsString(name_policy(ctx));
  }
  // A local class: clang prints it bare ("R"), and two functions' Rs, or a
  // function template's instantiations' Frames, were one record with
  // several "layouts". Its name starts with its function's, as the
  // demangler prints it: ns::Tree::scan(long)::R.
  if (const clang::FunctionDecl *fd = enclosing_function(rd))
    name = function_scope(*fd, ctx) + "::" + name;
  return name;
}

namespace {

// `text` with every whole identifier in `names` replaced by its value.
std::string substitute_names(const std::string &text,
                             const std::vector<std::pair<std::string, std::string>> &names) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (!ident(text[i]) || (i > 0 && ident(text[i - 1]))) {
      out += text[i++];
      continue;
    }
    size_t end = i;
    while (end < text.size() && ident(text[end]))
      ++end;
    std::string word = text.substr(i, end - i);
    auto it =
        std::find_if(names.begin(), names.end(), [&](const auto &n) { return n.first == word; });
    out += it == names.end() ? word : it->second;
    i = end;
  }
  return out;
}

// Whether argument `i` is its parameter's default. A default that names
// earlier parameters (`class H = std::hash<K>`) is compared as printed, with
// the earlier arguments put in: clang 14 offers no substitution outside Sema.
bool is_default_argument(const clang::TemplateParameterList &params,
                         llvm::ArrayRef<clang::TemplateArgument> args, unsigned i,
                         const clang::PrintingPolicy &policy, const clang::ASTContext &ctx) {
  const clang::NamedDecl *param = params.getParam(i);
  const clang::TemplateArgument &arg = args[i];
  if (const auto *type = llvm::dyn_cast<clang::TemplateTypeParmDecl>(param)) {
    if (!type->hasDefaultArgument() || arg.getKind() != clang::TemplateArgument::Type)
      return false;
    clang::QualType def = type->getDefaultArgument();
    if (!def->isDependentType())
      return ctx.hasSameType(def, arg.getAsType());
    std::vector<std::pair<std::string, std::string>> earlier;
    for (unsigned j = 0; j < i; ++j) {
      std::string value;
      llvm::raw_string_ostream os(value);
      args[j].print(policy, os, /*IncludeType=*/false);
      os.flush();
      earlier.emplace_back(params.getParam(j)->getNameAsString(), value);
    }
    return substitute_names(def.getAsString(policy), earlier) ==
           arg.getAsType().getAsString(policy);
  }
  if (const auto *value = llvm::dyn_cast<clang::NonTypeTemplateParmDecl>(param)) {
    if (!value->hasDefaultArgument() || arg.getKind() != clang::TemplateArgument::Integral)
      return false;
    const clang::Expr *def = value->getDefaultArgument();
    clang::Expr::EvalResult result;
    if (def->isValueDependent() || !def->EvaluateAsInt(result, ctx))
      return false;
    return llvm::APSInt::isSameValue(result.Val.getInt(), arg.getAsIntegral());
  }
  return false;
}

} // namespace

std::string spelled_record_name(const clang::RecordDecl &rd, const std::string &name,
                                const clang::ASTContext &ctx) {
  // The qualified name prints every template argument; code writes
  // `Table<int>` for `Table<int, std::string, 4>`. Each specialization in the
  // chain has the trailing arguments equal to their defaults left out.
  clang::PrintingPolicy policy = name_policy(ctx);
  std::string spelled = name;
  for (const clang::DeclContext *dc = &rd; dc; dc = dc->getParent()) {
    const auto *spec = llvm::dyn_cast<clang::ClassTemplateSpecializationDecl>(dc);
    if (!spec)
      continue;
    llvm::ArrayRef<clang::TemplateArgument> args = spec->getTemplateArgs().asArray();
    const clang::TemplateParameterList *params =
        spec->getSpecializedTemplate()->getTemplateParameters();
    if (!params || params->size() != args.size() || params->hasParameterPack())
      continue;
    unsigned kept = static_cast<unsigned>(args.size());
    while (kept > 0 && is_default_argument(*params, args, kept - 1, policy, ctx))
      --kept;
    if (kept == args.size())
      continue;
    std::string all, shortened;
    llvm::raw_string_ostream all_out(all), short_out(shortened);
    clang::printTemplateArgumentList(all_out, args, policy);
    clang::printTemplateArgumentList(short_out, args.take_front(kept), policy);
    all_out.flush();
    short_out.flush();
    const std::string written = spec->getNameAsString() + all;
    size_t at = spelled.find(written);
    if (at == std::string::npos)
      return {}; // printed otherwise than assumed: no second spelling rather than a wrong one
    spelled.replace(at, written.size(), spec->getNameAsString() + shortened);
  }
  return spelled == name ? std::string() : spelled;
}

std::string type_name(clang::QualType t, const clang::ASTContext &ctx) {
  if (const clang::RecordDecl *rd = t->getAsRecordDecl())
    if (std::string name = record_name(*rd, ctx); !name.empty())
      return name;
  return unnamed_spelled_plainly(t.getAsString(name_policy(ctx)));
}

std::string file_of(clang::SourceLocation loc, const clang::SourceManager &sm) {
  clang::SourceLocation file_loc = sm.getExpansionLoc(loc);
  if (file_loc.isInvalid())
    return {};
  if (const clang::FileEntry *fe = sm.getFileEntryForID(sm.getFileID(file_loc))) {
    llvm::StringRef real = fe->tryGetRealPathName();
    if (!real.empty())
      return real.str();
  }
  llvm::SmallString<256> path(sm.getFilename(file_loc));
  if (path.empty())
    return {};
  llvm::sys::fs::make_absolute(path);
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  return std::string(path.str());
}

std::optional<RecordLayout> layout_of(const clang::RecordDecl &rd, clang::ASTContext &ctx) {
  if (!layout_computable(rd))
    return std::nullopt;
  const auto *cxx = llvm::dyn_cast<clang::CXXRecordDecl>(&rd);
  if (cxx && cxx->isLambda())
    return std::nullopt;
  // Empty classes (tags, policies, a template holding only types, one
  // deriving from empty bases only) have nothing to lay out.
  if (rd.field_empty() && (!cxx || cxx->isEmpty()))
    return std::nullopt;
  RecordLayout r;
  r.name = record_name(rd, ctx);
  if (r.name.empty())
    return std::nullopt;
  r.spelled = spelled_record_name(rd, r.name, ctx);
  r.kind = rd.isUnion() ? "union" : rd.isClass() ? "class" : "struct";
  const clang::SourceManager &sm = ctx.getSourceManager();
  // An instantiation is where its template is defined, however it was
  // instantiated: an explicit `template class Tree<long, long>;` elsewhere
  // names the same record, which must not appear twice.
  clang::SourceLocation at = rd.getLocation();
  if (const auto *cxx_rd = llvm::dyn_cast<clang::CXXRecordDecl>(&rd);
      cxx_rd && llvm::isa<clang::ClassTemplateSpecializationDecl>(cxx_rd))
    if (const clang::CXXRecordDecl *pattern = cxx_rd->getTemplateInstantiationPattern())
      at = pattern->getLocation(); // the definition, not a forward declaration seen first
  r.file = file_of(at, sm);
  r.line = sm.getExpansionLineNumber(at);
  const clang::ASTRecordLayout &l = ctx.getASTRecordLayout(&rd);
  r.size = static_cast<uint64_t>(l.getSize().getQuantity());
  r.align = static_cast<uint64_t>(l.getAlignment().getQuantity());
  r.packed = rd.hasAttr<clang::PackedAttr>() || rd.hasAttr<clang::MaxFieldAlignmentAttr>();

  if (cxx) {
    // Itanium ABI: a dynamic class without a primary base puts its own vptr
    // first; with one, the vptr lives in that base.
    if (cxx->isDynamicClass() && !l.getPrimaryBase()) {
      FieldLayout vptr;
      vptr.name = "_vptr";
      vptr.type = "vtable pointer";
      vptr.size = vptr.align = ctx.getTargetInfo().getPointerWidth(0) / 8;
      vptr.role = FieldRole::kVptr;
      r.fields.push_back(vptr);
    }
    for (const clang::CXXBaseSpecifier &b : cxx->bases()) {
      const clang::CXXRecordDecl *base = b.getType()->getAsCXXRecordDecl();
      if (b.isVirtual() || base->isEmpty())
        continue;
      r.fields.push_back(
          base_member(*base, static_cast<uint64_t>(l.getBaseClassOffset(base).getQuantity()),
                      FieldRole::kBase, ctx));
    }
  }
  for (const clang::FieldDecl *fd : rd.fields()) {
    if (fd->isBitField() && fd->getBitWidthValue(ctx) == 0) {
      r.zero_width_bitfields = true; // it holds nothing, yet moves what follows
      continue;
    }
    // An unnamed bit-field (`unsigned :32;`) is no member: it is explicit
    // padding, which the holes and padding then show (as pahole does).
    if (fd->isUnnamedBitfield())
      continue;
    r.fields.push_back(data_member(*fd, l.getFieldOffset(fd->getFieldIndex()), ctx));
  }
  if (cxx)
    for (const clang::CXXBaseSpecifier &b : cxx->vbases()) {
      const clang::CXXRecordDecl *base = b.getType()->getAsCXXRecordDecl();
      if (base->isEmpty())
        continue;
      r.fields.push_back(
          base_member(*base, static_cast<uint64_t>(l.getVBaseClassOffset(base).getQuantity()),
                      FieldRole::kVirtualBase, ctx));
    }
  if (!r.is_union())
    std::stable_sort(
        r.fields.begin(), r.fields.end(),
        [](const FieldLayout &a, const FieldLayout &b) { return a.begin_bit() < b.begin_bit(); });
  compute_holes(r);
  return r;
}

} // namespace memlayout::inspector
