// Drives LLVMFuzzerTestOneInput without libFuzzer (gcc builds): replays the
// given files and directories, plus deterministic mutations of each, so the
// entry point runs in CI under the sanitizers gcc has.
// usage: fuzz_trace_reader [--mutations N] [--seed S] FILE|DIR...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

// Mutations that reach the decoder's interesting paths: bit flips hit
// checksums and magic, boundary bytes hit varints and lengths, cuts and
// splices hit record framing.
Bytes mutate(const Bytes &in, std::mt19937_64 &rng) {
  Bytes b = in;
  int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    if (b.empty())
      b.push_back(0);
    size_t at = rng() % b.size();
    switch (rng() % 6) {
    case 0:
      b[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
      break;
    case 1: {
      static constexpr uint8_t kBoundary[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe};
      b[at] = kBoundary[rng() % sizeof kBoundary];
      break;
    }
    case 2:
      b.resize(at);
      break;
    case 3: { // duplicate a chunk (a record twice, a field repeated)
      size_t len = std::min<size_t>(1 + rng() % 64, b.size() - at);
      Bytes chunk(b.begin() + static_cast<std::ptrdiff_t>(at),
                  b.begin() + static_cast<std::ptrdiff_t>(at + len));
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(rng() % (b.size() + 1)), chunk.begin(),
               chunk.end());
      break;
    }
    case 4: { // erase a chunk
      size_t len = std::min<size_t>(1 + rng() % 32, b.size() - at);
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
              b.begin() + static_cast<std::ptrdiff_t>(at + len));
      break;
    }
    case 5: { // a little-endian u32 length field set to something large
      if (at + 4 <= b.size()) {
        uint32_t v = static_cast<uint32_t>(rng() >> (rng() % 32));
        std::memcpy(&b[at], &v, 4);
      }
      break;
    }
    }
  }
  return b;
}

bool read_file(const std::filesystem::path &p, Bytes &out) {
  std::ifstream in(p, std::ios::binary);
  if (!in)
    return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

} // namespace

int main(int argc, char **argv) {
  long mutations = 0;
  uint64_t seed = 1;
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mutations" && i + 1 < argc)
      mutations = std::strtol(argv[++i], nullptr, 10);
    else if (a == "--seed" && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (std::filesystem::is_directory(a)) {
      std::vector<std::filesystem::path> files;
      for (const auto &e : std::filesystem::directory_iterator(a))
        if (e.is_regular_file())
          files.push_back(e.path());
      std::sort(files.begin(), files.end()); // same order, same mutations, every run
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else
      inputs.emplace_back(a);
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "usage: %s [--mutations N] [--seed S] FILE|DIR...\n", argv[0]);
    return 2;
  }
  long runs = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Bytes b;
    if (!read_file(inputs[i], b)) {
      std::fprintf(stderr, "cannot read %s\n", inputs[i].c_str());
      return 2;
    }
    LLVMFuzzerTestOneInput(b.data(), b.size());
    ++runs;
    std::mt19937_64 rng(seed * 1000003 + i);
    for (long m = 0; m < mutations; ++m) {
      Bytes mb = mutate(b, rng);
      LLVMFuzzerTestOneInput(mb.data(), mb.size());
      ++runs;
    }
  }
  std::printf("%ld inputs from %zu seed(s) decoded without a crash\n", runs, inputs.size());
  return 0;
}
