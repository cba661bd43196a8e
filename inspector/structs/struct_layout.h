// From clang's AST to RecordLayout: what ASTRecordLayout says about a record
// definition (the offsets the compiler will use), with the names memlayout
// shows for records and types.
#pragma once

#include "record_layout.h"

#include <optional>
#include <string>

namespace clang {
class ASTContext;
class QualType;
class RecordDecl;
class SourceLocation;
class SourceManager;
} // namespace clang

namespace memlayout::inspector {

// The name a record is reported under: qualified, template arguments
// included, no tag keyword ("ns::Tree<int>::Node"); an anonymous record
// named by a typedef takes the typedef's name; "" for an unnamed one.
std::string record_name(const clang::RecordDecl &rd, const clang::ASTContext &ctx);
// record_name() as code spells it: template arguments equal to their defaults
// left out, at every level (`ns::Table<int>::Slot`); empty when the same.
std::string spelled_record_name(const clang::RecordDecl &rd, const std::string &name,
                                const clang::ASTContext &ctx);

// A type's name, through record_name() when it is a record type (so that
// allocation sites and records agree), else as clang prints it.
std::string type_name(clang::QualType t, const clang::ASTContext &ctx);

// The layout of a complete, valid, non-dependent record definition; nullopt
// for anything else (a forward declaration, a template pattern, a record
// with errors in it, an unnamed record, a lambda's closure type, an empty
// class).
std::optional<RecordLayout> layout_of(const clang::RecordDecl &rd, clang::ASTContext &ctx);

// The absolute, normalised path of the file a location lies in (macro
// expansions: where they are expanded); "" when it is not in a file.
std::string file_of(clang::SourceLocation loc, const clang::SourceManager &sm);

} // namespace memlayout::inspector
