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

// 32 bytes: a vector of pointers to it grows to buffers of whole Twigs' size.
struct Twig {
  long key;
  Twig *next;
  long hits;
  long stamp;
};

} // namespace typed
