/* What a program sees of its signals' actions, and what it does with them,
 * as shells, git, Ruby and CPython do: asks whether SIGINT has its default
 * action (CPython installs its KeyboardInterrupt handler only then), saves
 * SIGTERM's action while it installs its own and puts the saved handler back
 * alone, with flags of its own (as bash's `trap - TERM` does), then dies of
 * the signal as the cleanup idiom `kill -TERM $$` has it.
 *
 *   signal_views [SIG]   (default 15: the signal to die of) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_signal(int sig) { (void)sig; }

static const char *seen(void (*handler)(int)) {
  return handler == SIG_DFL ? "default" : handler == SIG_IGN ? "ignored" : "a handler";
}

int main(int argc, char **argv) {
  int die_of = argc > 1 ? atoi(argv[1]) : SIGTERM;
  struct sigaction old, mine;
  sigaction(SIGINT, NULL, &old);
  printf("SIGINT: %s\n", seen(old.sa_handler));
  memset(&mine, 0, sizeof mine);
  mine.sa_handler = on_signal;
  sigaction(die_of, &mine, &old);
  memset(&mine, 0, sizeof mine);
  mine.sa_handler = old.sa_handler;
  sigemptyset(&mine.sa_mask);
  sigaction(die_of, &mine, NULL);
  void (*before)(int) = signal(SIGHUP, SIG_IGN);
  printf("SIGHUP: %s\n", seen(before));
  signal(SIGHUP, before);
  fflush(stdout);
  raise(die_of);
  puts("survived");
  return 0;
}
