#include "alloc_sites.h"

#include "struct_layout.h"

#include <clang/AST/ASTContext.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>

#include <algorithm>
#include <cctype>
#include <optional>

namespace memlayout::inspector {
namespace {

using namespace clang::ast_matchers;

std::string lower(std::string s) {
  for (char &c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A declaration's qualified name with its own template arguments, as the
// demangler prints them ("mk<5>", "F<A>"): getQualifiedNameAsString()
// leaves a specialization's own arguments out.
std::string name_with_arguments(const clang::NamedDecl &d) {
  std::string name;
  llvm::raw_string_ostream out(name);
  clang::PrintingPolicy policy(d.getASTContext().getLangOpts());
  policy.SuppressUnwrittenScope = true;
  d.getNameForDiagnostic(out, policy, /*Qualified=*/true);
  return out.str();
}

// A function's qualified name, with its own template arguments where it is
// a function template's specialization: its instantiations allocate
// different types at one line, and the recorded stacks tell them apart by
// those arguments.
std::string function_name(const clang::FunctionDecl &fd) {
  return fd.getTemplateSpecializationArgs() ? name_with_arguments(fd)
                                            : fd.getQualifiedNameAsString();
}

// A class's, with a specialization's own arguments, as its members' names
// carry them.
std::string class_name(const clang::CXXRecordDecl &cls) {
  return llvm::isa<clang::ClassTemplateSpecializationDecl>(cls) ? name_with_arguments(cls)
                                                                : cls.getQualifiedNameAsString();
}

// The function a statement is in, as a qualified name; a lambda's body
// counts as its enclosing function's, marked "::<lambda>".
std::string enclosing_function(const clang::Stmt &s, clang::ASTContext &ctx) {
  std::string suffix;
  clang::DynTypedNodeList parents = ctx.getParents(s);
  while (!parents.empty()) {
    const clang::DynTypedNode &p = parents[0];
    if (p.get<clang::LambdaExpr>() && suffix.empty())
      suffix = "::<lambda>";
    if (const auto *fd = p.get<clang::FunctionDecl>()) {
      const auto *md = llvm::dyn_cast<clang::CXXMethodDecl>(fd);
      if (!md || !md->getParent()->isLambda())
        return function_name(*fd) + suffix;
    }
    // A default member initializer ("Node *head = new Node;") runs in the
    // class's constructors, which the recorded stack names "Sent::Sent".
    if (const auto *field = p.get<clang::FieldDecl>())
      if (const auto *cls = llvm::dyn_cast<clang::CXXRecordDecl>(field->getParent());
          cls && !cls->isLambda() && cls->getIdentifier())
        return class_name(*cls) + "::" + cls->getName().str() + suffix;
    parents = ctx.getParents(p);
  }
  return {};
}

// The first sizeof(T), sizeof expr or offsetof(T, m) in a statement, in
// source order: the type a size argument is computed from.
std::optional<clang::QualType> sized_type(const clang::Stmt *s) {
  if (!s)
    return std::nullopt;
  if (const auto *u = llvm::dyn_cast<clang::UnaryExprOrTypeTraitExpr>(s))
    if (u->getKind() == clang::UETT_SizeOf)
      return u->isArgumentType() ? u->getArgumentType() : u->getArgumentExpr()->getType();
  if (const auto *o = llvm::dyn_cast<clang::OffsetOfExpr>(s))
    return o->getTypeSourceInfo()->getType();
  for (const clang::Stmt *child : s->children())
    if (auto t = sized_type(child))
      return t;
  return std::nullopt;
}

// An allocator's value_type (std::allocator<T>, memlayout::seg::allocator,
// std::allocator_traits<A>): what its allocate(n) allocates.
std::optional<clang::QualType> value_type(const clang::FunctionDecl &fd, clang::ASTContext &ctx) {
  const auto *md = llvm::dyn_cast<clang::CXXMethodDecl>(&fd);
  if (!md)
    return std::nullopt;
  for (const clang::NamedDecl *d : md->getParent()->lookup(&ctx.Idents.get("value_type")))
    if (const auto *td = llvm::dyn_cast<clang::TypedefNameDecl>(d))
      return td->getUnderlyingType();
  return std::nullopt;
}

// The pointer type the call's result is converted to, explicitly or not
// (`Node *n = malloc(size)` in C, `(Node *)malloc(size)`).
std::optional<clang::QualType> converted_to(const clang::Expr &call, clang::ASTContext &ctx) {
  std::optional<clang::QualType> found;
  clang::DynTypedNodeList parents = ctx.getParents(call);
  while (!parents.empty()) {
    const clang::DynTypedNode &p = parents[0];
    if (p.get<clang::ParenExpr>()) {
    } else if (const auto *cast = p.get<clang::CastExpr>()) {
      clang::QualType t = cast->getType();
      if (t->isPointerType() && !t->getPointeeType()->isVoidType())
        found = t->getPointeeType();
    } else {
      break;
    }
    parents = ctx.getParents(p);
  }
  return found;
}

bool is_make_function(const clang::FunctionDecl &fd) {
  if (!fd.isInStdNamespace() || !fd.getIdentifier())
    return false;
  llvm::StringRef n = fd.getName();
  return is_std_factory(std::string_view(n.data(), n.size()));
}

// A name with "alloc" in it also names bookkeeping (track_allocation,
// is_allocated): an allocator hands out memory, a pointer (posix_memalign
// through its first argument).
bool returns_memory(const clang::FunctionDecl &fd) {
  clang::QualType r = fd.getReturnType();
  return r->isPointerType() || r->isDependentType() || fd.getNameAsString() == "posix_memalign";
}

// What an allocator hands out: a pointer to writable memory of no type yet,
// void *, char *, unsigned char *, signed char * or std::byte *, through
// typedefs. A const pointee is memory to read, not new memory.
bool is_untyped_memory(clang::QualType t) {
  t = t.getCanonicalType();
  if (!t->isPointerType())
    return false;
  clang::QualType to = t->getPointeeType();
  return !to.isConstQualified() && (to->isVoidType() || to->isCharType() || to->isStdByteType());
}

// The record a call's untyped result becomes (`struct entry *e = fl_get(fl)`,
// `static_cast<Node *>(pool.get())`), or nullopt.
std::optional<clang::QualType> converted_to_record(const clang::Expr &call,
                                                   clang::ASTContext &ctx) {
  std::optional<clang::QualType> t = converted_to(call, ctx);
  if (!t || !(*t)->isRecordType())
    return std::nullopt;
  return t;
}

// Whether an argument points at objects of `record` (`list_next(l, node)`
// into a node, `grow(v, n)` into a vec): the call hands back memory of that
// kind it was given, an element it found or the same object moved, not a
// new one.
bool takes_pointer_to(const clang::CallExpr &c, clang::QualType record) {
  const clang::QualType want = record.getCanonicalType().getUnqualifiedType();
  for (const clang::Expr *arg : c.arguments()) {
    clang::QualType t = arg->IgnoreParenImpCasts()->getType().getCanonicalType();
    if (t->isPointerType() && t->getPointeeType().getUnqualifiedType() == want)
      return true;
  }
  return false;
}

bool allocates(const clang::Stmt *s, ObtainsMemory &known);

// A function returning untyped memory that may be an allocator of the
// program's own (pool_get, arena_push, fl_get, xnew) rather than one of the
// many functions that return a pointer into memory they were given or
// already hold (memcpy, strchr, bsearch, pthread_getspecific, getenv, a
// hash table's lookup). The fewest wrong sites come from what is known of
// the function, not from a list of names:
//   - a library builtin (memcpy, memset, strchr, ... even declared by hand)
//     or a function first declared in a system header is the C or C++
//     library's, and the library's allocators all say so in their names
//     (malloc, calloc, aligned_alloc, ...: is_allocating_function). A
//     deny-list of standard names would be the same rule, never complete;
//   - a function this translation unit defines must obtain memory itself:
//     its body allocates (new, an allocator, or such a function of its own),
//     so `vec_at`, `list_first` and lookups that walk a table make no
//     sites. One defined elsewhere is judged by its signature alone.
// `known`: the bodies judged so far (false while being judged: recursion).
bool may_allocate(const clang::FunctionDecl &fd, ObtainsMemory &known) {
  if (!is_untyped_memory(fd.getReturnType()) || fd.getBuiltinID() != 0)
    return false;
  const clang::SourceManager &sm = fd.getASTContext().getSourceManager();
  if (sm.isInSystemHeader(sm.getExpansionLoc(fd.getCanonicalDecl()->getLocation())))
    return false;
  const clang::FunctionDecl *def = nullptr;
  if (!fd.hasBody(def) || !def)
    return true;
  auto [it, fresh] = known.try_emplace(def, false);
  if (!fresh)
    return it->second;
  bool yes = allocates(def->getBody(), known);
  known[def] = yes; // `it` may have moved: the body's callees were added
  return yes;
}

// A call in a body that obtains memory: new, a call to an allocator by name
// (directly or through a pointer whose name says so), or to a function
// may_allocate() accepts.
bool allocates(const clang::Stmt *s, ObtainsMemory &known) {
  if (!s)
    return false;
  if (const auto *n = llvm::dyn_cast<clang::CXXNewExpr>(s)) {
    const clang::FunctionDecl *op = n->getOperatorNew();
    if (!op || !op->isReservedGlobalPlacementOperator())
      return true;
  }
  if (const auto *c = llvm::dyn_cast<clang::CallExpr>(s)) {
    if (const clang::FunctionDecl *fd = c->getDirectCallee()) {
      if ((is_allocating_function(fd->getNameAsString()) && returns_memory(*fd)) ||
          may_allocate(*fd, known))
        return true;
    } else if (const auto *d = llvm::dyn_cast_or_null<clang::NamedDecl>(c->getCalleeDecl());
               d && d->getIdentifier() && is_allocating_function(d->getName().str()) &&
               c->getType()->isPointerType()) {
      return true;
    }
  }
  // A lambda defined in the body allocates when it is called, not here.
  if (llvm::isa<clang::LambdaExpr>(s))
    return false;
  for (const clang::Stmt *child : s->children())
    if (allocates(child, known))
      return true;
  return false;
}

} // namespace

bool is_allocating_function(const std::string &name) {
  const std::string n = lower(name);
  if (n == "operator new" || n == "operator new[]" || n == "memalign" || n == "posix_memalign")
    return true;
  if (n.find("alloc") == std::string::npos)
    return false;
  return n.find("dealloc") == std::string::npos && n.find("free") == std::string::npos &&
         n != "alloca" && n.rfind("__builtin_alloca", 0) != 0 && n != "get_allocator";
}

void AllocSiteCollector::add_matchers(MatchFinder &finder) {
  finder.addMatcher(cxxNewExpr(unless(isExpansionInSystemHeader())).bind("new"), this);
  finder.addMatcher(
      callExpr(unless(isExpansionInSystemHeader()), callee(functionDecl().bind("callee")))
          .bind("call"),
      this);
  // Calls through function pointers: no declaration names a function.
  finder.addMatcher(callExpr(unless(isExpansionInSystemHeader()), unless(callee(functionDecl())),
                             unless(callee(unresolvedLookupExpr())))
                        .bind("indirect"),
                    this);
  // std::make_shared<T>() in a template nothing instantiates names no
  // function yet: only the templates it may call.
  finder.addMatcher(callExpr(unless(isExpansionInSystemHeader()),
                             callee(unresolvedLookupExpr().bind("unresolved")))
                        .bind("call"),
                    this);
}

void AllocSiteCollector::run(const MatchFinder::MatchResult &result) {
  clang::ASTContext &ctx = *result.Context;
  const clang::Expr *e = nullptr;
  std::optional<clang::QualType> type;
  std::string call;

  if (const auto *n = result.Nodes.getNodeAs<clang::CXXNewExpr>("new")) {
    // Placement new constructs in memory allocated elsewhere. In a template
    // not yet instantiated the operator is unresolved: one pointer argument
    // is the same placement form, and so is one whose type depends on the
    // template's parameters (`new (A::allocate(sizeof(T))) T`), which each
    // instantiation resolves (there a custom operator new that allocates
    // is a site).
    const clang::FunctionDecl *op = n->getOperatorNew();
    auto placement_like = [](const clang::Expr *arg) {
      clang::QualType t = arg->getType();
      return t->isPointerType() || t->isDependentType();
    };
    if (op ? op->isReservedGlobalPlacementOperator()
           : n->getNumPlacementArgs() == 1 && placement_like(n->getPlacementArg(0)))
      return;
    e = n;
    type = n->getAllocatedType();
    call = n->isArray() ? "new[]" : "new";
  } else if (const auto *c = result.Nodes.getNodeAs<clang::CallExpr>("call")) {
    const auto *fd = result.Nodes.getNodeAs<clang::FunctionDecl>("callee");
    e = c;
    if (const auto *u = result.Nodes.getNodeAs<clang::UnresolvedLookupExpr>("unresolved")) {
      const clang::NamedDecl *first = u->getNumDecls() ? *u->decls_begin() : nullptr;
      const clang::FunctionDecl *candidate = first ? first->getAsFunction() : nullptr;
      if (!candidate || !is_make_function(*candidate) || u->getNumTemplateArgs() == 0 ||
          u->getTemplateArgs()[0].getArgument().getKind() != clang::TemplateArgument::Type)
        return;
      type = u->getTemplateArgs()[0].getArgument().getAsType();
      call = candidate->getNameAsString();
      if ((*type)->isArrayType())
        call += "[]";
    } else if (!fd) {
      return;
    } else if (is_make_function(*fd)) {
      const clang::TemplateArgumentList *args = fd->getTemplateSpecializationArgs();
      if (!args || args->size() == 0 || args->get(0).getKind() != clang::TemplateArgument::Type)
        return;
      type = args->get(0).getAsType();
      call = fd->getNameAsString();
      if ((*type)->isArrayType())
        call += "[]";
    } else if (call = fd->getNameAsString(); is_allocating_function(call)) {
      if (!returns_memory(*fd))
        return;
      type = sized_type(c);
      if (!type)
        type = value_type(*fd, ctx);
      if (!type)
        type = converted_to(*c, ctx);
    } else {
      // The program's own allocator, named as it likes (fl_get, pool_get,
      // arena_push): its untyped result becomes a record. The record, not
      // a sizeof in the arguments, is the type: the call says what it is
      // for, the arguments may size something else (a pool's slot).
      if (!is_untyped_memory(fd->getReturnType()))
        return;
      type = converted_to_record(*c, ctx);
      if (!type || takes_pointer_to(*c, *type) || !may_allocate(*fd, obtains_memory_))
        return;
    }
  } else if (const auto *ind = result.Nodes.getNodeAs<clang::CallExpr>("indirect")) {
    // Through a function pointer (`a->alloc(a, sizeof(T))`, `(*alloc_fn)(n)`)
    // only the pointer's name is known: a site when that name says it
    // allocates, as a function's would. Any other name is not, however
    // untyped its result: no body says whether it allocates, and callbacks
    // returning void * (a table's find, an iterator's next) mostly hand
    // back memory that exists.
    const auto *d = llvm::dyn_cast_or_null<clang::NamedDecl>(ind->getCalleeDecl());
    if (ind->getDirectCallee() || !d || !d->getIdentifier() || !ind->getType()->isPointerType() ||
        !is_allocating_function(d->getName().str()))
      return;
    e = ind;
    call = d->getName().str();
    type = sized_type(ind);
    if (!type)
      type = converted_to(*ind, ctx);
  }
  if (!e || !type || type->isNull())
    return;
  clang::QualType allocated = ctx.getBaseElementType(type->getNonReferenceType());
  allocated = allocated.getUnqualifiedType();
  if (allocated->isVoidType())
    return;

  const clang::SourceManager &sm = ctx.getSourceManager();
  clang::SourceLocation begin = sm.getExpansionLoc(e->getBeginLoc());
  AllocSite s;
  s.file = file_of(begin, sm);
  if (s.file.empty())
    return;
  s.line = sm.getExpansionLineNumber(begin);
  s.column = sm.getExpansionColumnNumber(begin);
  s.end_line = std::max(s.line, sm.getExpansionLineNumber(sm.getExpansionLoc(e->getEndLoc())));
  s.function = enclosing_function(*e, ctx);
  s.type = type_name(allocated, ctx);
  s.call = call;
  s.dependent = allocated->isDependentType();
  out_.push_back(std::move(s));
}

} // namespace memlayout::inspector
