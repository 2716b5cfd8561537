package compactor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

type modelRec struct {
	key, value string
	tomb       bool
	appendedMs int64
}

// TestModel appends random keys, values and tombstones (random codecs,
// segment sizes, idempotent or plain producers) and runs many cleaning
// passes in between, some with an offset map too small for the dirty
// region. After every pass it checks the log against a model of every
// append: offsets strictly increase and each record is the one appended at
// its offset; each key's latest record is still there, unless it is a
// tombstone past delete.retention.ms, in which case the key has no record
// left at all; and the cleaned region holds each key at most once. At the
// end, with every horizon passed, the log is exactly the latest value of
// each live key. franz-go decodes every segment after every pass.
func TestModel(t *testing.T) { runSeeds(t, 16, runModel) }

// runSeeds runs a model with seeds 0 to n-1 (2 with -short).
func runSeeds(t *testing.T, n int, run func(*testing.T, uint64)) {
	if testing.Short() {
		n = 2
	}
	for seed := range n {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { run(t, uint64(seed)) })
	}
}

// modelEnv is a model test's topic: random segment size, a short
// delete.retention.ms.
func modelEnv(t *testing.T, rng *rand.Rand, maxSegment, retention int) *env {
	return newEnv(t, map[string]string{
		"internal.segment.bytes": fmt.Sprint(300 + rng.IntN(maxSegment)),
		"delete.retention.ms":    fmt.Sprint(retention),
	})
}

// randomRecords makes n records of keys key-0 to key-<keys-1>, one in
// tombOneIn a tombstone, with values naming the step.
func randomRecords(rng *rand.Rand, n, keys, tombOneIn, step int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		k := fmt.Sprintf("key-%d", rng.IntN(keys))
		if rng.IntN(tombOneIn) == 0 {
			recs[i] = tomb(k)
		} else {
			recs[i] = kv(k, fmt.Sprintf("v%d-%d", step, i))
		}
	}
	return recs
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	const retention = 10_000
	e := modelEnv(t, rng, 3000, retention)
	codecs := []codec.Codec{codec.None, codec.Gzip, codec.Snappy, codec.LZ4, codec.Zstd}
	model := map[int64]modelRec{}
	keys := 5 + rng.IntN(40)
	steps := 250 + rng.IntN(150)
	passes := 0
	for step := range steps {
		recs := randomRecords(rng, 1+rng.IntN(5), keys, 7, step)
		pid := int64(-1)
		if rng.IntN(4) == 0 {
			pid = int64(rng.IntN(3))
		}
		info := e.produceTo(e.log, codecs[rng.IntN(len(codecs))], pid, false, recs...)
		for i, r := range recs {
			model[info.FirstOffset+int64(i)] = modelRec{key: string(r.Key), value: string(r.Value), tomb: r.Value == nil, appendedMs: e.clock.ms}
		}
		e.clock.ms += int64(rng.IntN(400))
		if rng.IntN(10) == 0 {
			e.roll()
		}
		if rng.IntN(15) == 0 {
			e.cfg.DedupeBufferSize = int64(24 * (10 + rng.IntN(100)))
			if rng.IntN(2) == 0 {
				e.cfg.DedupeBufferSize = 1 << 20
			}
			rep, err := RunOnce(context.Background(), e.dir, PassOptions{Force: rng.IntN(3) == 0, Config: e.cfg})
			if err != nil {
				t.Fatalf("step %d: pass: %v", step, err)
			}
			passes++
			checkModel(t, e, model, retention, rep)
		}
	}
	// Converge: roll, pass every horizon, clean until nothing changes.
	e.roll()
	e.cfg.DedupeBufferSize = 1 << 20
	e.pass(true) // first sight of the last tombstones sets their horizon
	e.clock.ms += retention
	for range 2 {
		e.pass(true)
	}
	checkModel(t, e, model, retention, PassReport{})
	latest := latestPerKey(model)
	var want []string
	for off := int64(0); off < e.log.LogEndOffset(); off++ {
		if l, ok := latest[model[off].key]; ok && l == off && !model[off].tomb {
			want = append(want, got{Offset: off, Key: model[off].key, Value: model[off].value}.String())
		}
	}
	if g := e.read(); fmt.Sprint(want) != fmt.Sprint(stringsOf(g)) {
		t.Fatalf("converged log:\n%s\nwant\n%v", show(g), want)
	}
	t.Logf("seed %d: %d appends, %d passes, %d keys", seed, len(model), passes, keys)
}

func stringsOf(g []got) []string {
	out := make([]string, len(g))
	for i, r := range g {
		out[i] = r.String()
	}
	return out
}

func latestPerKey(model map[int64]modelRec) map[string]int64 {
	latest := map[string]int64{}
	for off, r := range model {
		if l, ok := latest[r.key]; !ok || off > l {
			latest[r.key] = off
		}
	}
	return latest
}

func checkModel(t *testing.T, e *env, model map[int64]modelRec, retention int64, rep PassReport) {
	t.Helper()
	recs := e.read()
	present := map[string][]int64{}
	for _, r := range recs {
		m, ok := model[r.Offset]
		if !ok || m.key != r.Key || m.tomb != r.Tomb || (!m.tomb && m.value != r.Value) {
			t.Fatalf("offset %d holds %s, model has %+v", r.Offset, r, m)
		}
		present[r.Key] = append(present[r.Key], r.Offset)
	}
	for key, off := range latestPerKey(model) {
		offs := present[key]
		m := model[off]
		switch {
		case len(offs) > 0 && offs[len(offs)-1] == off:
		case len(offs) == 0 && m.tomb && e.clock.ms >= m.appendedMs+retention:
			// A tombstone past its horizon, with every older value gone.
		default:
			t.Fatalf("key %s: latest record at %d (%+v) but the log holds %v (now %d)", key, off, m, offs, e.clock.ms)
		}
	}
	ck, err := e.dir.ReadCleanerCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	for _, cleanedTo := range ck {
		seen := map[string]bool{}
		for _, r := range recs {
			if r.Offset >= cleanedTo {
				break
			}
			if seen[r.Key] {
				t.Fatalf("key %s twice below the cleaned offset %d: %s\n%s", r.Key, cleanedTo, show(recs), rep)
			}
			seen[r.Key] = true
		}
	}
}
