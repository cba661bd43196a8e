// A task queue templated on its callback, as event loops and thread pools
// write them: instantiated with a lambda, whose closure type GCC leaves
// without a linkage name in the debug info of the queue's members. Tasks are
// allocated by the queue's push (out of line: it is large enough), run and
// freed in batches.
//
//   task_queue [TASKS]   prints the sum of the tasks' results
#include <cstdio>
#include <cstdlib>

template <class Callback> class TaskQueue {
public:
  explicit TaskQueue(Callback cb) : cb_(cb) {}
  ~TaskQueue() { drain(); }

  void push(long arg) {
    auto *t = new Task{arg, 0, nullptr};
    t->weight = arg % 7 ? arg * 3 : arg / 2;
    if (tail_)
      tail_->next = t;
    else
      head_ = t;
    tail_ = t;
    ++size_;
  }

  long drain() {
    long sum = 0;
    while (Task *t = head_) {
      head_ = t->next;
      sum += cb_(t->arg) + t->weight;
      delete t;
    }
    tail_ = nullptr;
    size_ = 0;
    return sum;
  }

  long size() const { return size_; }

private:
  struct Task {
    long arg, weight;
    Task *next;
  };
  Callback cb_;
  Task *head_ = nullptr, *tail_ = nullptr;
  long size_ = 0;
};

int main(int argc, char **argv) {
  long tasks = argc > 1 ? std::atol(argv[1]) : 10000;
  long scale = argc > 2 ? std::atol(argv[2]) : 3;
  TaskQueue queue([scale](long x) { return x * scale; });
  long sum = 0;
  for (long i = 0; i < tasks; ++i) {
    queue.push(i);
    if (queue.size() == 64)
      sum += queue.drain();
  }
  sum += queue.drain();
  std::printf("%ld\n", sum);
  return 0;
}
