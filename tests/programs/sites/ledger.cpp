// An in-memory ledger as services write them: accounts and an audit trail in
// std::map, an index in std::unordered_map, pending transfers in std::list,
// every container filled by a function of its own, built -O2 with the
// containers' members inlined or out of line as the compiler chooses.
//
//   ledger [ACCOUNTS]   prints the totals
#include <cstdio>
#include <cstdlib>
#include <list>
#include <map>
#include <string>
#include <unordered_map>

struct Account {
  long id;
  double balance;
  int flags;
};

struct AuditEntry {
  long account;
  double amount;
  long when;
};

struct Ledger {
  std::map<long, Account> accounts;
  std::map<long, AuditEntry> audit;
  std::unordered_map<long, long> by_number;
  std::list<std::pair<long, double>> pending;
};

void load_accounts(Ledger &l, long n) {
  for (long i = 0; i < n; ++i)
    l.accounts[i] = Account{i, 100.0 + i % 17, 0};
}

void load_audit(Ledger &l, long n) {
  for (long i = 0; i < n; ++i)
    l.audit.emplace(i * 7, AuditEntry{i % 97, i * 0.5, i});
}

void index_accounts(Ledger &l) {
  for (const auto &[id, a] : l.accounts)
    l.by_number.emplace(1000000 + id * 3, id);
}

void queue_transfers(Ledger &l, long n) {
  for (long i = 0; i < n; ++i)
    l.pending.emplace_back(i % 101, 1.25 * i);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 12000;
  Ledger l;
  load_accounts(l, n);
  load_audit(l, n / 4);
  index_accounts(l);
  queue_transfers(l, n / 2);
  double total = 0;
  for (const auto &[from, amount] : l.pending)
    total += amount + l.accounts[from].balance;
  std::printf("%zu %zu %zu %zu %.1f\n", l.accounts.size(), l.audit.size(), l.by_number.size(),
              l.pending.size(), total);
  return 0;
}
