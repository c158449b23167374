package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// Every shard count cuts the seeds into disjoint slices that together are
// every seed, each slice in seed order.
func TestSwarmShardSeeds(t *testing.T) {
	for _, seeds := range []int{1, 2, 7, 100} {
		whole := harness.SwarmShard{}.Seeds(10, seeds)
		if len(whole) != seeds || whole[0] != 10 || whole[seeds-1] != 10+uint64(seeds-1) {
			t.Fatalf("%d seeds: whole swarm runs %v", seeds, whole)
		}
		for count := 1; count <= min(seeds, 5); count++ {
			var all []uint64
			for index := range count {
				shard := harness.SwarmShard{Index: index, Count: count}
				part := shard.Seeds(10, seeds)
				if len(part) == 0 || !slices.IsSorted(part) || shard.Len(seeds) != len(part) {
					t.Fatalf("%d seeds, shard %d/%d: %v", seeds, index, count, part)
				}
				all = append(all, part...)
			}
			if count == 3 && seeds == 7 && !slices.Equal(harness.SwarmShard{Index: 1, Count: 3}.Seeds(10, seeds), []uint64{11, 14}) {
				t.Fatal("shard 1/3 of seeds 10-16 is not 11 and 14: the shards do not interleave")
			}
			slices.Sort(all)
			if !slices.Equal(all, whole) {
				t.Fatalf("%d seeds in %d shards: %v, want %v", seeds, count, all, whole)
			}
		}
	}
}

func swarmBase(t *testing.T) spec.Scenario {
	t.Helper()
	sc, ok := spec.Builtin("overlap")
	if !ok {
		t.Fatal("no built-in overlap")
	}
	sc.Duration = 5 * time.Second
	return sc
}

// comparable is a swarm result as JSON but for what depends on the wall
// clock.
func comparable(r *harness.SwarmResult) string {
	c := *r
	c.Elapsed = 0
	c.FirstCounterexample = map[history.Mode]*harness.SwarmFirst{}
	for m, f := range r.FirstCounterexample {
		if f != nil {
			g := *f
			g.Wall = 0
			f = &g
		}
		c.FirstCounterexample[m] = f
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// n shards merged are the unsharded swarm, seed for seed: the same
// failures, counts and first counterexamples.
func TestSwarmShardsMergeToWhole(t *testing.T) {
	base := swarmBase(t)
	reproduce := func(seed uint64) string { return fmt.Sprintf("seed %d", seed) }
	opts := harness.SwarmOptions{Seeds: 23, FirstSeed: 5, Jobs: 2, Reproduce: reproduce}
	whole, err := harness.Swarm(t.Context(), base, opts)
	if err != nil {
		t.Fatal(err)
	}
	naive := whole.FirstCounterexample[history.Naive]
	if naive == nil || whole.NaiveSeedsStale == 0 {
		t.Fatalf("the swarm found no naive stale write to merge: %+v", whole)
	}
	if _, ok := whole.FirstCounterexample[history.Fenced]; !ok {
		t.Fatal("no entry for the fenced mode's first counterexample")
	}
	if naive.SeedsRun != int(naive.Seed-opts.FirstSeed)+1 || naive.Reproduce != reproduce(naive.Seed) || naive.Digest == "" {
		t.Fatalf("naive first counterexample %+v", naive)
	}
	want := comparable(whole)
	for _, count := range []int{1, 2, 3, 7} {
		var parts []*harness.SwarmResult
		// Given in any order: the merge sorts.
		for index := count - 1; index >= 0; index-- {
			o := opts
			o.Shard = harness.SwarmShard{Index: index, Count: count}
			part, err := harness.Swarm(t.Context(), base, o)
			if err != nil {
				t.Fatal(err)
			}
			if part.Shard == nil || *part.Shard != o.Shard || part.Seeds != len(o.Shard.Seeds(opts.FirstSeed, opts.Seeds)) {
				t.Fatalf("shard %d/%d: shard %v, %d seeds", index, count, part.Shard, part.Seeds)
			}
			parts = append(parts, part)
		}
		merged, err := harness.MergeSwarms(parts)
		if err != nil {
			t.Fatalf("%d shards: %v", count, err)
		}
		if got := comparable(merged); got != want {
			t.Errorf("%d shards merged:\n%s\nunsharded:\n%s", count, got, want)
		}
	}
}

func TestMergeSwarmsRefusesWhatIsNotOneSwarm(t *testing.T) {
	base := swarmBase(t)
	shard := func(index, count int, change func(*harness.SwarmOptions, *spec.Scenario)) *harness.SwarmResult {
		o := harness.SwarmOptions{Seeds: 6, FirstSeed: 1, Shard: harness.SwarmShard{Index: index, Count: count}}
		sc := base
		if change != nil {
			change(&o, &sc)
		}
		r, err := harness.Swarm(t.Context(), sc, o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	whole, err := harness.Swarm(t.Context(), base, harness.SwarmOptions{Seeds: 6, FirstSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		parts []*harness.SwarmResult
	}{
		{"none", nil},
		{"missing", []*harness.SwarmResult{shard(0, 3, nil), shard(2, 3, nil)}},
		{"twice", []*harness.SwarmResult{shard(0, 2, nil), shard(0, 2, nil), shard(1, 2, nil)}},
		{"other counts", []*harness.SwarmResult{shard(0, 2, nil), shard(1, 3, nil)}},
		{"a whole swarm", []*harness.SwarmResult{shard(0, 1, nil), whole}},
		{"other seeds", []*harness.SwarmResult{shard(0, 2, nil), shard(1, 2, func(o *harness.SwarmOptions, _ *spec.Scenario) { o.FirstSeed = 2 })}},
		{"other scenario", []*harness.SwarmResult{shard(0, 2, nil), shard(1, 2, func(_ *harness.SwarmOptions, sc *spec.Scenario) { sc.TTL *= 2 })}},
		{"other ranges", []*harness.SwarmResult{shard(0, 2, nil), shard(1, 2, func(o *harness.SwarmOptions, _ *spec.Scenario) {
			r := harness.DefaultSwarmRanges
			r.Fixed = []harness.SwarmKnob{harness.SwarmPush}
			o.Ranges = &r
		})}},
	} {
		if _, err := harness.MergeSwarms(tc.parts); !errors.Is(err, harness.ErrBadShard) {
			t.Errorf("%s: MergeSwarms = %v, want ErrBadShard", tc.name, err)
		}
	}
	// Results read from files may say anything: none is trusted.
	hostile := func(change func(*harness.SwarmResult)) []*harness.SwarmResult {
		a, b := *shard(0, 2, nil), *shard(1, 2, nil)
		a.Shard, b.Shard = &harness.SwarmShard{Index: 0, Count: 2}, &harness.SwarmShard{Index: 1, Count: 2}
		change(&b)
		return []*harness.SwarmResult{&a, &b}
	}
	for _, tc := range []struct {
		name  string
		parts []*harness.SwarmResult
	}{
		{"count 0", hostile(func(r *harness.SwarmResult) { r.Shard.Count = 0 })},
		{"a billion shards", hostile(func(r *harness.SwarmResult) { r.Shard.Count = 1e9 })},
		{"a billion shards in every result", func() []*harness.SwarmResult {
			parts := hostile(func(r *harness.SwarmResult) { r.Shard.Count = 1e9 })
			parts[0].Shard.Count = 1e9
			return parts
		}()},
		{"index out of range", hostile(func(r *harness.SwarmResult) { r.Shard.Index = 5 })},
		{"seeds backwards", hostile(func(r *harness.SwarmResult) { r.LastSeed, r.FirstSeed = 0, 7 })},
		{"more seeds than the shard has", hostile(func(r *harness.SwarmResult) { r.Seeds = 4 })},
		{"another shard's failure", hostile(func(r *harness.SwarmResult) { r.Failures = []harness.SwarmFailure{{Seed: 1}} })},
		{"a seed outside the swarm", hostile(func(r *harness.SwarmResult) { r.Failures = []harness.SwarmFailure{{Seed: 8}} })},
		{"another shard's first counterexample", hostile(func(r *harness.SwarmResult) {
			r.FirstCounterexample = map[history.Mode]*harness.SwarmFirst{history.Naive: {Seed: 3}}
		})},
	} {
		if _, err := harness.MergeSwarms(tc.parts); !errors.Is(err, harness.ErrBadShard) {
			t.Errorf("%s: MergeSwarms = %v, want ErrBadShard", tc.name, err)
		}
	}
	for _, bad := range []harness.SwarmShard{{Index: 2, Count: 2}, {Index: -1, Count: 2}, {Index: 0, Count: -1}} {
		if _, err := harness.Swarm(t.Context(), base, harness.SwarmOptions{Seeds: 4, Shard: bad}); !errors.Is(err, harness.ErrBadShard) {
			t.Errorf("shard %+v: Swarm = %v, want ErrBadShard", bad, err)
		}
	}
}

// The merge puts the shards' failures in seed order and takes each mode's
// lowest first counterexample, counting its seeds over the whole swarm.
func TestMergeSwarmsOrdersSeeds(t *testing.T) {
	part := func(index int, failing ...uint64) *harness.SwarmResult {
		r := &harness.SwarmResult{Scenario: "s", Base: "b", FirstSeed: 1, LastSeed: 9, Shard: &harness.SwarmShard{Index: index, Count: 3},
			Seeds: 3, Elapsed: time.Duration(index+1) * time.Second, FirstCounterexample: map[history.Mode]*harness.SwarmFirst{history.Fenced: nil}}
		for i, seed := range failing {
			r.Failures = append(r.Failures, harness.SwarmFailure{Seed: seed})
			if i == 0 {
				r.FirstCounterexample[history.Fenced] = &harness.SwarmFirst{Seed: seed, SeedsRun: 1 + int(seed-1)/3, Wall: time.Second}
			}
		}
		return r
	}
	merged, err := harness.MergeSwarms([]*harness.SwarmResult{part(0, 7), part(1, 5, 8), part(2)})
	if err != nil {
		t.Fatal(err)
	}
	var seeds []uint64
	for _, f := range merged.Failures {
		seeds = append(seeds, f.Seed)
	}
	first := merged.FirstCounterexample[history.Fenced]
	if !slices.Equal(seeds, []uint64{5, 7, 8}) || first == nil || first.Seed != 5 || first.SeedsRun != 5 ||
		merged.Seeds != 9 || merged.Elapsed != 3*time.Second || merged.Shard != nil {
		t.Fatalf("merged failures %v, first %+v, %d seeds in %s, shard %v", seeds, first, merged.Seeds, merged.Elapsed, merged.Shard)
	}
}

// FuzzMergeSwarms merges two shards' results as any file may hold them:
// the merge never panics, and what it accepts covers every seed once.
func FuzzMergeSwarms(f *testing.F) {
	base := spec.Scenario{}
	if sc, ok := spec.Builtin("gap"); ok {
		base = sc
	}
	for index := range 2 {
		r, err := harness.Swarm(context.Background(), base, harness.SwarmOptions{Seeds: 5, FirstSeed: 3, Shard: harness.SwarmShard{Index: index, Count: 2}})
		if err != nil {
			f.Fatal(err)
		}
		b, _ := json.Marshal(r)
		f.Add(b, b)
	}
	f.Add([]byte(`{"shard":{"index":0,"count":0}}`), []byte(`{"shard":{"index":1,"count":2},"first_seed":5,"last_seed":1}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var ra, rb harness.SwarmResult
		if json.Unmarshal(a, &ra) != nil || json.Unmarshal(b, &rb) != nil {
			return
		}
		out, err := harness.MergeSwarms([]*harness.SwarmResult{&ra, &rb})
		if err != nil {
			if !errors.Is(err, harness.ErrBadShard) {
				t.Fatalf("MergeSwarms = %v, not ErrBadShard", err)
			}
			return
		}
		if ra.Shard.Count != 2 || ra.Shard.Index == rb.Shard.Index || out.Seeds != ra.Seeds+rb.Seeds {
			t.Fatalf("merged %+v and %+v into %+v", ra.Shard, rb.Shard, out)
		}
		for _, f := range out.FirstCounterexample {
			if f != nil && (f.SeedsRun < 1 || uint64(f.SeedsRun) > out.LastSeed-out.FirstSeed+1) {
				t.Fatalf("first counterexample %+v outside seeds %d-%d", f, out.FirstSeed, out.LastSeed)
			}
		}
	})
}
