// The records tests/structs/programs/typed_alloc.cpp allocates, shared with
// the test that checks the report names their groups.
#pragma once

namespace typed {

struct Node {
  long key;
  Node *left;
  Node *right;
  long value;
  char payload[24];
};

struct Desc {
  int op;
  Node *target;
};

} // namespace typed
