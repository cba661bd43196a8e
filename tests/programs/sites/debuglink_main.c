// Builds and frees N entries in a library whose debug info is a debuglink
// file (debuglink_lib.c).
#include <stdio.h>
#include <stdlib.h>

long debuglink_build(int n);

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10000;
  printf("%ld\n", debuglink_build(n));
  return 0;
}
