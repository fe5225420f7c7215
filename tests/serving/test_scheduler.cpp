// The continuous-batching scheduler and the paged KV cache: admission under the token budget,
// the sequence limit and the free blocks; chunked prefill; decode after prefill; preemption of
// the newest request (recompute and swap); a disaggregated decode rank's hand-overs behind its
// preempted requests. Closed forms on hand-sized cases.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "serving/scheduler.hpp"

namespace moesim {

namespace {

Request make_request(std::int64_t id, std::int64_t prompt, std::int64_t output) {
  Request r;
  r.spec = RequestSpec{id, 0, prompt, output};
  r.prefill_target = prompt;
  r.arrive(0);
  return r;
}

SchedulerConfig config(std::int64_t budget, std::int64_t max_seqs = 256, bool chunked = true,
                       Preemption p = Preemption::kRecompute) {
  SchedulerConfig c;
  c.max_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.chunked_prefill = chunked;
  c.kv_block_tokens = 16;
  c.preemption = p;
  return c;
}

}  // namespace

TEST(PagedKvCache, BlocksGrowAndRelease) {
  PagedKvCache kv(10, 16);
  EXPECT_EQ(kv.blocks_for(1), 1);
  EXPECT_EQ(kv.blocks_for(16), 1);
  EXPECT_EQ(kv.blocks_for(17), 2);
  EXPECT_TRUE(kv.grow(7, 33));  // 3 blocks
  EXPECT_EQ(kv.used_blocks(), 3);
  EXPECT_TRUE(kv.grow(7, 48));  // still 3
  EXPECT_EQ(kv.used_blocks(), 3);
  EXPECT_FALSE(kv.grow(8, 16 * 8));  // 8 > 7 free: refused, nothing changes
  EXPECT_EQ(kv.used_blocks(), 3);
  EXPECT_TRUE(kv.grow(8, 16 * 7));
  EXPECT_EQ(kv.free_blocks(), 0);
  kv.release(7);
  EXPECT_EQ(kv.used_blocks(), 7);
  EXPECT_EQ(kv.peak_used_blocks(), 10);
}

// The blocks held per request live in an open-addressing table with backward-shift erasure:
// thousands of grows and releases over clustered and scattered ids (table growth, wrap-around,
// erasures in the middle of probe runs) agree with a std::map at every step.
TEST(PagedKvCache, HeldBlocksAgreeWithAMapOverGrowsAndReleases) {
  PagedKvCache kv(1'000'000, 16);
  std::map<std::int64_t, std::int64_t> ref;
  std::mt19937_64 rng(11);
  std::int64_t used = 0;
  for (int round = 0; round < 20000; ++round) {
    // Ids from a sliding window (as a serving run's), from a fixed range of thousands (a table
    // with long probe runs), and now and then a large one.
    const std::uint64_t pick = rng() % 8;
    const std::int64_t id = pick == 0   ? static_cast<std::int64_t>(rng() % 1'000'000'000)
                            : pick < 4 ? static_cast<std::int64_t>(rng() % 3000)
                                       : round / 4 + static_cast<std::int64_t>(rng() % 300);
    if (rng() % 3 == 0) {
      kv.release(id);
      if (auto it = ref.find(id); it != ref.end()) {
        used -= it->second;
        ref.erase(it);
      }
    } else {
      const std::int64_t tokens = static_cast<std::int64_t>(rng() % 200);
      ASSERT_TRUE(kv.grow(id, tokens));
      std::int64_t& held = ref[id];
      const std::int64_t extra = std::max<std::int64_t>(0, kv.blocks_for(tokens) - held);
      held += extra;
      used += extra;
      if (held == 0) ref.erase(id);
    }
    ASSERT_EQ(kv.used_blocks(), used);
    ASSERT_EQ(kv.held_blocks(id), ref.count(id) ? ref[id] : 0);
  }
  for (const auto& [id, blocks] : ref) ASSERT_EQ(kv.held_blocks(id), blocks) << id;
  for (std::int64_t id = 0; id < 6000; ++id) {
    if (!ref.count(id)) {
      ASSERT_EQ(kv.held_blocks(id), 0) << id;
    }
  }
}

TEST(RankScheduler, ChunkedPrefillThenDecode) {
  RankScheduler s(config(64), PagedKvCache(100, 16));
  Request r = make_request(0, 100, 3);
  s.enqueue(&r);
  RankStep a = s.schedule(5);
  ASSERT_EQ(a.chunks.size(), 1u);
  EXPECT_EQ(a.chunks[0].new_tokens, 64);
  EXPECT_EQ(a.chunks[0].context, 0);
  EXPECT_EQ(r.first_scheduled, 5);
  EXPECT_TRUE(s.complete(a).empty());  // a chunk of the prompt: no token yet
  RankStep b = s.schedule(6);
  ASSERT_EQ(b.chunks.size(), 1u);
  EXPECT_EQ(b.chunks[0].new_tokens, 36);
  EXPECT_EQ(b.chunks[0].context, 64);
  EXPECT_EQ(s.complete(b).size(), 1u);  // the prompt is done: the first token
  EXPECT_EQ(r.generated, 1);
  RankStep c = s.schedule(7);
  ASSERT_EQ(c.chunks.size(), 1u);
  EXPECT_EQ(c.chunks[0].new_tokens, 1);
  EXPECT_EQ(c.chunks[0].context, 100);
  s.complete(c);
  EXPECT_EQ(r.generated, 2);
  EXPECT_EQ(r.computed, 101);
  EXPECT_EQ(s.cache().used_blocks(), 7);  // 101 tokens
}

TEST(RankScheduler, WithoutChunkingAPromptWaitsForRoomInTheBudget) {
  RankScheduler s(config(100, 256, false), PagedKvCache(100, 16));
  Request a = make_request(0, 60, 2), b = make_request(1, 60, 2);
  s.enqueue(&a);
  s.enqueue(&b);
  RankStep st = s.schedule(0);
  ASSERT_EQ(st.chunks.size(), 1u);  // 60 + 60 > 100: b waits whole
  EXPECT_EQ(st.chunks[0].request, &a);
  s.complete(st);
  RankStep next = s.schedule(1);
  ASSERT_EQ(next.chunks.size(), 2u);  // a's decode token, then b's whole prompt
  EXPECT_EQ(next.chunks[0].new_tokens, 1);
  EXPECT_EQ(next.chunks[1].new_tokens, 60);
}

TEST(RankScheduler, SequenceLimitBoundsTheRunningSet) {
  RankScheduler s(config(1000, 2), PagedKvCache(100, 16));
  std::vector<Request> rs;
  for (int i = 0; i < 3; ++i) rs.push_back(make_request(i, 10, 5));
  for (auto& r : rs) s.enqueue(&r);
  const RankStep st = s.schedule(0);
  EXPECT_EQ(st.chunks.size(), 2u);
  EXPECT_EQ(s.running(), 2u);
  EXPECT_EQ(s.outstanding(), 3u);
}

TEST(RankScheduler, RecomputePreemptsTheNewestRequest) {
  // 4 blocks of 16: two prompts of 32 tokens fill the cache; the first decode token needs a
  // fifth block, so the newer request is preempted and must be prefilled again.
  RankScheduler s(config(1000), PagedKvCache(4, 16));
  Request a = make_request(0, 32, 10), b = make_request(1, 32, 10);
  s.enqueue(&a);
  s.enqueue(&b);
  s.complete(s.schedule(0));
  EXPECT_EQ(s.cache().free_blocks(), 0);
  const RankStep st = s.schedule(1);
  EXPECT_EQ(st.preemptions, 1);
  ASSERT_EQ(st.chunks.size(), 1u);
  EXPECT_EQ(st.chunks[0].request, &a);
  EXPECT_EQ(b.state, RequestState::kWaiting);
  EXPECT_EQ(b.computed, 0);
  EXPECT_EQ(b.prefill_target, 33);  // prompt + the token it had generated
  EXPECT_EQ(b.preemptions, 1);
  EXPECT_EQ(s.cache().used_blocks(), 3);  // a holds 33 tokens
}

TEST(RankScheduler, SwapKeepsTheCacheAndBringsItBack) {
  RankScheduler s(config(1000, 256, true, Preemption::kSwap), PagedKvCache(4, 16));
  Request a = make_request(0, 32, 2), b = make_request(1, 32, 10);
  s.enqueue(&a);
  s.enqueue(&b);
  s.complete(s.schedule(0));
  const RankStep st = s.schedule(1);
  EXPECT_EQ(st.swap_out_tokens, 32);
  EXPECT_EQ(b.state, RequestState::kSwapped);
  EXPECT_EQ(b.computed, 32);  // kept in host memory
  for (Request* r : s.complete(st))
    if (r->done()) s.retire(r);  // a finishes with its second token
  const RankStep back = s.schedule(2);
  EXPECT_EQ(back.swap_in_tokens, 32);
  ASSERT_EQ(back.chunks.size(), 1u);
  EXPECT_EQ(back.chunks[0].new_tokens, 1);
  EXPECT_EQ(back.chunks[0].context, 32);
}

TEST(RankScheduler, RunningRequestsComeBeforeAdmissions) {
  RankScheduler s(config(10), PagedKvCache(100, 16));
  Request a = make_request(0, 4, 5), b = make_request(1, 30, 5);
  s.enqueue(&a);
  s.complete(s.schedule(0));
  s.enqueue(&b);
  const RankStep st = s.schedule(1);
  ASSERT_EQ(st.chunks.size(), 2u);
  EXPECT_EQ(st.chunks[0].request, &a);  // the decode first
  EXPECT_EQ(st.chunks[1].new_tokens, 9);  // then b's first chunk fills the budget
  EXPECT_EQ(st.new_tokens(), 10);
}

// A decode rank of a disaggregated deployment: a request it preempted waits at the front of its
// queue for blocks, and a prefilled request's KV may not take them first (vLLM allocates an
// incoming KV cache only when its scheduler reaches that request, behind the preempted one).
TEST(RankScheduler, APreemptedRequestComesBeforeNewHandovers) {
  RankScheduler s(config(1000), PagedKvCache(4, 16));
  Request a = make_request(0, 32, 10), b = make_request(1, 32, 10);
  s.enqueue(&a);
  s.enqueue(&b);
  s.complete(s.schedule(0));
  s.complete(s.schedule(1));  // b preempted; a holds 33 tokens in 3 blocks
  ASSERT_EQ(b.state, RequestState::kWaiting);
  ASSERT_EQ(s.cache().free_blocks(), 1);
  Request h = make_request(2, 10, 5);  // prefilled elsewhere: 10 tokens of KV, its first token out
  h.computed = 10;
  h.generated = 1;
  EXPECT_FALSE(s.takes_handover(h)) << "the free block waits for b";
  s.retire(&a);
  const RankStep st = s.schedule(2);
  ASSERT_EQ(st.chunks.size(), 1u);
  EXPECT_EQ(st.chunks[0].request, &b);  // b prefilled again: 33 tokens in 3 blocks
  EXPECT_TRUE(s.takes_handover(h));      // the last block may take new KV now
}

// A decode handed over with its KV waits holding blocks. When the rank's only running request is
// preempted and needs more blocks to come back than the waiting decode leaves, no step would free
// any: the waiting decode is preempted instead (recomputed later) and both finish.
TEST(RankScheduler, WithNothingRunningAWaitingHandoverIsPreemptedForTheFront) {
  RankScheduler s(config(1000), PagedKvCache(35, 16));
  Request p = make_request(0, 32, 40);
  s.enqueue(&p);
  s.complete(s.schedule(0));  // p: 32 tokens in 2 blocks
  Request h = make_request(1, 512, 10);
  h.computed = 512;
  h.generated = 1;
  h.state = RequestState::kTransferring;
  ASSERT_TRUE(s.takes_handover(h));  // 33 blocks free: its 32 and its first decode's
  ASSERT_TRUE(s.cache().grow(1, 512));
  s.enqueue(&h);
  // p's decodes take the last free block, so h waits for its 33rd; at 48 tokens p needs a fourth
  // block, preempts itself, and needs 4 blocks (49 tokens) to be prefilled again with 3 free.
  RankStep st;
  Tick t = 1;
  for (; t < 100 && st.preemptions == 0; ++t) {
    st = s.schedule(t);
    s.complete(st);
  }
  EXPECT_EQ(st.preemptions, 2);
  ASSERT_EQ(st.chunks.size(), 1u);
  EXPECT_EQ(st.chunks[0].request, &p);
  EXPECT_EQ(st.chunks[0].new_tokens, 49);
  EXPECT_EQ(h.state, RequestState::kWaiting);
  EXPECT_EQ(h.computed, 0);
  EXPECT_EQ(h.prefill_target, 513);  // its prompt and its first token, recomputed here
  EXPECT_EQ(h.preemptions, 1);
  for (; t < 1000 && s.has_work(); ++t) {
    st = s.schedule(t);
    ASSERT_FALSE(st.chunks.empty()) << "step " << t << ": nothing runs";
    for (Request* r : s.complete(st))
      if (r->done()) s.retire(r);
  }
  EXPECT_TRUE(p.done());
  EXPECT_TRUE(h.done());
}

}  // namespace moesim
