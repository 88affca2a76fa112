// Checks plan_rows and plan_split_rows (solutions/day05_layernorm_performance/layernorm_fast.h)
// for every row length up to 70000 and every element size, and split plans around the longest
// row they take: a plan that fits covers each column exactly once with the shapes the kernels
// assume. Prints "ok" or the first violation, and exits 1.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "layernorm_fast.h"

namespace {

int failures = 0;

void fail(const char* what, long long cols, int bytes, bool aligned, const RowPlan& p) {
  if (failures++ < 10) {
    std::printf("cols %lld, %d-byte elements, aligned %d: %s (vec %d, threads %d, rows/block %d, vecs/thread %d)\n",
                cols, bytes, aligned, what, p.vec, p.threads_per_row, p.rows_per_block, p.vecs_per_thread);
  }
}

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// The kernels' mapping: thread t of a row owns vectors k * threads + t, k < vecs_per_thread,
// and vector v holds columns v * vec ... v * vec + vec - 1.
void check(long long cols, int bytes, bool aligned, int min_vecs, int max_vecs, int max_threads) {
  const RowPlan p = plan_rows(cols, bytes, aligned, min_vecs, max_vecs, max_threads);
  const int vec = kVectorBytes / bytes;
  const bool whole_vectors = aligned && cols % vec == 0;
  const long long largest = static_cast<long long>(max_threads) * max_vecs * vec;
  if (!p.fits()) {
    if ((whole_vectors && cols <= largest) || (!whole_vectors && cols <= 32)) fail("does not fit but should", cols, bytes, aligned, p);
    return;
  }
  if (p.vec != (whole_vectors ? vec : 1)) fail("wrong vector width", cols, bytes, aligned, p);
  if (!whole_vectors && cols > 32) fail("unaligned row longer than 32 planned", cols, bytes, aligned, p);
  if (p.vecs_per_thread < 1 || p.vecs_per_thread > max_vecs) fail("vecs/thread not in 1 .. max", cols, bytes, aligned, p);
  if (p.threads_per_row <= 32) {
    if (!power_of_two(p.threads_per_row)) fail("threads/row not a power of two", cols, bytes, aligned, p);
    if (!power_of_two(p.vecs_per_thread) || p.vecs_per_thread > min_vecs) fail("short row: vecs/thread not a power of two <= min", cols, bytes, aligned, p);
    if (p.threads_per_row * p.rows_per_block != kPlanThreadsPerBlock) fail("block is not 256 threads", cols, bytes, aligned, p);
  } else {
    if (p.threads_per_row % 32 != 0 || p.threads_per_row > max_threads) fail("threads/row not a multiple of 32 <= max", cols, bytes, aligned, p);
    if (p.rows_per_block != 1) fail("a block of more than 32 threads per row holds several rows", cols, bytes, aligned, p);
    if (p.vecs_per_thread < min_vecs) fail("long row: fewer than min vecs/thread", cols, bytes, aligned, p);
    const long long vecs = cols / p.vec;
    if (p.vecs_per_thread > min_vecs && static_cast<long long>(p.vecs_per_thread - 1) * max_threads >= vecs)
      fail("long row: more vecs/thread than max_threads needs", cols, bytes, aligned, p);
  }
  std::vector<int> seen(cols, 0);
  for (int t = 0; t < p.threads_per_row; ++t) {
    for (int k = 0; k < p.vecs_per_thread; ++k) {
      const long long v = static_cast<long long>(k) * p.threads_per_row + t;
      for (int e = 0; e < p.vec; ++e) {
        const long long col = v * p.vec + e;
        if (col < cols) ++seen[col];
      }
    }
  }
  for (long long col = 0; col < cols; ++col) {
    if (seen[col] != 1) {
      fail("a column is not covered exactly once", cols, bytes, aligned, p);
      break;
    }
  }
}

// A split row: chunk c owns vectors c * chunk_vecs + k * threads + t of the row, those below
// its own count (chunk_vecs, the last chunk the rest), which must not be empty.
void check_split(long long cols, int bytes, bool aligned, int vecs_per_thread, int max_threads) {
  const RowPlan p = plan_split_rows(cols, bytes, aligned, vecs_per_thread, max_threads);
  const int vec = kVectorBytes / bytes;
  const bool whole_vectors = aligned && cols % vec == 0;
  const long long vecs = cols / vec;
  const long long per_block = static_cast<long long>(max_threads) * vecs_per_thread;
  if (!p.fits()) {
    if (whole_vectors && vecs <= kMaxChunks * per_block) fail("split does not fit but should", cols, bytes, aligned, p);
    return;
  }
  if (!whole_vectors) fail("split of a row that is not whole aligned vectors", cols, bytes, aligned, p);
  if (p.vec != vec || p.rows_per_block != 1 || p.vecs_per_thread != vecs_per_thread) fail("split: wrong shape", cols, bytes, aligned, p);
  if (p.threads_per_row % 32 != 0 || p.threads_per_row > max_threads) fail("split: threads not a multiple of 32 <= max", cols, bytes, aligned, p);
  if (p.chunks < 1 || p.chunks > kMaxChunks || (p.chunks - 1) * per_block >= vecs) fail("split: not the fewest chunks", cols, bytes, aligned, p);
  std::vector<int> seen(cols, 0);
  for (int c = 0; c < p.chunks; ++c) {
    const long long first = static_cast<long long>(c) * p.chunk_vecs;
    const long long own = std::min<long long>(p.chunk_vecs, vecs - first);
    if (own <= 0) fail("split: an empty chunk", cols, bytes, aligned, p);
    if (own > static_cast<long long>(p.threads_per_row) * p.vecs_per_thread) fail("split: a chunk its block cannot hold", cols, bytes, aligned, p);
    for (long long v = 0; v < own; ++v) {
      for (int e = 0; e < vec; ++e) ++seen[(first + v) * vec + e];
    }
  }
  for (long long col = 0; col < cols; ++col) {
    if (seen[col] != 1) {
      fail("split: a column is not covered exactly once", cols, bytes, aligned, p);
      break;
    }
  }
}

}  // namespace

int main() {
  for (int bytes : {2, 4, 8}) {
    for (bool aligned : {true, false}) {
      for (long long cols = 1; cols <= 70000; cols += (cols < 5000 ? 1 : 97)) {
        check(cols, bytes, aligned, 8, 8, 512);                                  // forward, version 4
        check(cols, bytes, aligned, 16 / (16 / bytes), 16 / (16 / bytes), 1024);  // fused backward
        if (bytes == 2) check(cols, bytes, aligned, 4, 4, 384);                  // ... 16-bit rows over 8192
        check_split(cols, bytes, aligned, 4, 512);                               // forward, long rows
        check_split(cols, bytes, aligned, 4, 480);                               // ... on a T4 (64 KB a block)
        for (int threads = 512; threads >= 32; threads /= 2) {
          check_split(cols, bytes, aligned, 16 / (16 / bytes), threads);         // fused backward, long rows
        }
      }
    }
  }
  // Around the longest row a split can take (kMaxChunks blocks): one a vector longer must not
  // fit, and is left to version 3.
  for (int bytes : {2, 4, 8}) {
    const int vec = kVectorBytes / bytes;
    for (int threads : {512, 480, 256, 128, 64, 32}) {  // 480: the forward's split on a T4
      for (int vecs_per_thread : {4, 16 / (16 / bytes)}) {  // forward, fused backward
        const long long longest = static_cast<long long>(kMaxChunks) * threads * vecs_per_thread * vec;
        for (long long cols = longest - 2 * vec; cols <= longest + 2 * vec; ++cols) {
          check_split(cols, bytes, true, vecs_per_thread, threads);
        }
      }
    }
  }
  std::printf(failures ? "%d violations\n" : "ok\n", failures);
  return failures ? 1 : 0;
}
