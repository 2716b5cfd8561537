// Command benchreport turns `go test -bench` output into BENCHMARKS.md:
// each target figure next to its baseline measured in the same run, the
// ratio, and whether it meets the target. scripts/bench runs it.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// pair is one target: figure / baseline throughput must reach min; with
// no baseline, the figure's own MB/s must reach min (an absolute target).
type pair struct {
	what     string
	figure   string // benchmark name without the -N GOMAXPROCS suffix
	baseline string
	min      float64
	issue    string
}

var pairs = []pair{
	{"append 1 KiB records in 16 KiB batches vs raw sequential write", "BenchmarkAppend/log", "BenchmarkAppend/rawwrite", 0.8, "#2"},
	{"batch iteration + CRC verify vs plain CRC-32C", "BenchmarkIterate/iter_verify", "BenchmarkIterate/crc32c", 0.5, "#2"},
	{"record decode vs franz-go kmsg", "BenchmarkDecode/tiered", "BenchmarkDecode/kmsg", 1.0, "#2"},
	{"compaction (1 KiB records, 10% distinct keys) vs copying the file", "BenchmarkClean/clean", "BenchmarkClean/copy", 0.5, "#3"},
	{"upload 4 MiB segments (uploader, MinIO, concurrency 4) vs raw PutObject (minio-go)", "BenchmarkUpload/seg=4MiB/uploader", "BenchmarkUpload/seg=4MiB/raw_put", 0.9, "#5"},
	{"upload 32 MiB segments (uploader, MinIO, concurrency 4) vs raw PutObject (minio-go)", "BenchmarkUpload/seg=32MiB/uploader", "BenchmarkUpload/seg=32MiB/raw_put", 0.9, "#5"},
	{"sequential cold read through the fetch service (HTTP, Go client) vs raw GetObject", "BenchmarkFetch/service_cold", "BenchmarkFetch/raw_get", 0.8, "#6"},
	{"cache-hit read through the fetch service (HTTP, Go client)", "BenchmarkFetch/service_warm", "", 1000, "#6"},
	{"kcat warm read from the fetch service vs from kfake holding the same batches", "BenchmarkKcat/tiered_warm", "BenchmarkKcat/kfake", 1.0, "#6"},
}

type result struct {
	iters  []float64 // b.N of each run
	mbps   []float64
	nsop   []float64
	alloc  []float64
	bytes  []float64            // B/op
	extras map[string][]float64 // b.ReportMetric units such as peak-RSS-MiB
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// perRun formats the median and range of figure[i] / baseline[i].
func perRun(figure, baseline []float64) string {
	n := min(len(figure), len(baseline))
	var rs []float64
	for i := range n {
		if baseline[i] > 0 {
			rs = append(rs, figure[i]/baseline[i])
		}
	}
	if len(rs) == 0 {
		return "—"
	}
	sort.Float64s(rs)
	return fmt.Sprintf("%.2f (%.2f–%.2f)", median(rs), rs[0], rs[len(rs)-1])
}

func parse(r io.Reader) (map[string]*result, string, error) {
	res := map[string]*result{}
	cpu := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "cpu: ") {
			cpu = strings.TrimSpace(strings.TrimPrefix(line, "cpu: ")) // the CPU name may be padded
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		r := res[name]
		if r == nil {
			r = &result{}
			res[name] = r
		}
		if n, err := strconv.ParseFloat(f[1], 64); err == nil {
			r.iters = append(r.iters, n)
		}
		for i := 2; i+1 < len(f); i++ {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "MB/s":
				r.mbps = append(r.mbps, v)
			case "ns/op":
				r.nsop = append(r.nsop, v)
			case "allocs/op":
				r.alloc = append(r.alloc, v)
			case "B/op":
				r.bytes = append(r.bytes, v)
			default:
				if strings.ContainsAny(f[i+1], "/-") && !strings.Contains(f[i+1], "ns/op") {
					if r.extras == nil {
						r.extras = map[string][]float64{}
					}
					r.extras[f[i+1]] = append(r.extras[f[i+1]], v)
				}
			}
		}
	}
	return res, cpu, sc.Err()
}

// extra is the median of a reported metric, or NaN when absent.
func (r *result) extra(unit string) float64 {
	if r == nil || len(r.extras[unit]) == 0 {
		return math.NaN()
	}
	return median(r.extras[unit])
}

// writeCost writes how the remote tier's costs grow (#5): finding the
// segment of one offset as a partition's history grows
// (BenchmarkFindOffset), and one sidecar scan pass as partitions grow
// (BenchmarkSidecarPass).
func writeCost(b *strings.Builder, res map[string]*result) {
	b.WriteString("\n## How cost grows (#5)\n\n")
	b.WriteString("Finding the segment that holds one offset (manifest/bench_test.go). Cold: decode the root from\n" +
		"its bytes and load at most one sub-manifest, as a reader without caches does; warm: root decoded and\n" +
		"sub-manifests cached, as the fetch service runs.\n\n")
	b.WriteString("| committed segments | cold time/lookup | bytes read/lookup | root bytes | sub-manifests/lookup | warm time/lookup |\n|---|---|---|---|---|---|\n")
	for _, n := range []int{1_000, 10_000, 100_000} {
		cold, warm := res[fmt.Sprintf("BenchmarkFindOffset/segments=%d/cold", n)], res[fmt.Sprintf("BenchmarkFindOffset/segments=%d/warm", n)]
		if cold == nil || warm == nil {
			fmt.Fprintf(b, "| %d | not run | | | | |\n", n)
			continue
		}
		fmt.Fprintf(b, "| %d | %.1f ms | %.0f KB | %.0f KB | %.2f | %.0f ns |\n", n, median(cold.nsop)/1e6,
			cold.extra("bytes/lookup")/1e3, cold.extra("root-bytes")/1e3, cold.extra("subs/lookup"), median(warm.nsop))
	}
	b.WriteString("\nOne sidecar scan pass over a broker log dir whose segments are all committed (the steady state\n" +
		"between rolls; remotetier/uploader_bench_test.go): listing, high watermarks, reconciling against the\n" +
		"cached manifests. Retained heap is what the uploader keeps between passes.\n\n")
	b.WriteString("| partitions | time/pass | allocated/pass | retained heap | retained/partition |\n|---|---|---|---|---|\n")
	for _, n := range []int{100, 1000} {
		r := res[fmt.Sprintf("BenchmarkSidecarPass/partitions=%d", n)]
		if r == nil {
			fmt.Fprintf(b, "| %d | not run | | | |\n", n)
			continue
		}
		fmt.Fprintf(b, "| %d | %.1f ms | %.1f MB | %.2f MiB | %.1f KiB |\n", n, median(r.nsop)/1e6, median(r.bytes)/1e6,
			r.extra("retained-heap-MiB"), r.extra("retained-KiB/partition"))
	}
}

// replayShapes are BenchmarkReplay's shapes (integration/replay_bench_test.go),
// in the order of the curve.
var replayShapes = []string{
	"parts=1/seg=1MiB", "parts=8/seg=1MiB", "parts=32/seg=1MiB", "parts=128/seg=1MiB",
	"parts=1/seg=16MiB", "parts=8/seg=16MiB", "parts=32/seg=16MiB", "parts=128/seg=16MiB",
	"parts=8/seg=1MiB/consumers=8",
}

// Issue 17's targets.
const (
	replayColdMin      = 0.8  // cold / the lesser of raw GET and warm
	replayWarmMin      = 1.25 // warm / kfake, at 32 and 128 partitions
	firstByteMaxOfGet  = 2.5  // cold first byte p50 / one 4 MiB range GET's p50
	replayWarmMinParts = 32
)

// kcatMalloc says which glibc malloc settings the replay curve's kcat ran
// with: TIERED_BENCH_KCAT_TUNABLES when scripts/bench ran with it set (in
// this process's environment too), else the bench's fixed thresholds.
func kcatMalloc() string {
	tun, ok := os.LookupEnv("TIERED_BENCH_KCAT_TUNABLES")
	switch {
	case !ok:
		return "glibc's malloc thresholds fixed for kcat,\n" +
			"every step alike (kcatTunables in integration/replay_bench_test.go: with glibc's moving defaults\n" +
			"kcat gave its heap back to the kernel and faulted it in again at random, 6,700 to 96,000 page\n" +
			"faults per GB in identical 1 x 1 MiB reads, its MB/s following them, 276 to 642)"
	case tun == "":
		return "kcat with glibc's own malloc settings (TIERED_BENCH_KCAT_TUNABLES empty)"
	default:
		return "kcat with `GLIBC_TUNABLES=" + tun + "` (TIERED_BENCH_KCAT_TUNABLES)"
	}
}

// writeReplay writes the replay curve (#17): for each shape, kcat cold via
// a new fetch process against its two baselines (raw GETs at the same
// concurrency over the same objects, and the same kcat read fully
// cached), the warm read against kfake, the store GETs, the fetch
// process's CPU and peak RSS; then the cold first byte. It returns the
// targets missed.
func writeReplay(b *strings.Builder, res map[string]*result) (failed int) {
	b.WriteString("\n## Replay curve (#17)\n\n")
	b.WriteString("`BenchmarkReplay` (integration/replay_bench_test.go): a topic of P partitions in 1 MiB or 16 MiB\n" +
		"segments, read from the log start to the end by one `kcat -C -o 0 -e` (or 8 at once, one\n" +
		"partition each; `-X fetch.wait.max.ms=100` for every broker alike, so that the end of the log costs\n" +
		"100 ms rather than librdkafka's 500 ms max wait; " + kcatMalloc() + "). cold: a new `tiered fetch` process (256 MiB cache,\n" +
		"16 concurrent GETs, 64 MiB in flight; its defaults otherwise, so its budgets' memory is taken at\n" +
		"start-up, `fetch.pretouch`); raw GET: minio-go GETs of the same .log objects, 16 at a time; warm: the same kcat read\n" +
		"again from that process, every chunk cached; kfake: the same kcat read from franz-go's kfake holding\n" +
		"the same batches (the same records, so MB/s ratios are records/s ratios). The limit is the lesser\n" +
		"of raw GET and warm. GETs are the cache's range GETs, whose target is one per segment plus each\n" +
		"partition's first index: all of them, then the sequential read's own; apart from them, the end\n" +
		"checks' (the final segment's tail, or its index and tail, that each partition's high watermark is\n" +
		"checked against before it is first served, by ListOffsets or the first Fetch). CPU is the fetch process's user+system time per GB\n" +
		"served; its peak RSS (VmHWM), pretouched memory included, is bounded by cache + in-flight budget + 64 MiB.\n" +
		"kcat starts at offset 0, the log start, rather than `-o beginning`: with `-o beginning`, in about one\n" +
		"start in ten (from kfake as from the fetch service; in most reads of eight processes starting\n" +
		"together) librdkafka asks for a partition's offsets before its own broker thread has taken the\n" +
		"partition on and waits its fixed 500 ms offset-query backoff doing nothing (its debug log: \"no current\n" +
		"leader for partition\", \"offset query timer\"). An absolute offset needs no offset query; a read that\n" +
		"still logs the backoff fails the benchmark rather than be timed.\n\n")
	b.WriteString("| shape | cold MB/s | raw GET ×16 MB/s | warm MB/s | cold / limit | target | warm / kfake | target | GETs/MiB | GETs/segment (bound); the read's own | end-check GETs/partition | CPU s/GB cold, warm | peak RSS MiB (bound) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, sh := range replayShapes {
		raw, cold, warm, kf := replaySteps(res, sh)
		if raw == nil || cold == nil || warm == nil || kf == nil || len(cold.mbps) == 0 || len(raw.mbps) == 0 || len(warm.mbps) == 0 || len(kf.mbps) == 0 {
			fmt.Fprintf(b, "| %s | not run | | | | | | | | | | | |\n", sh)
			continue
		}
		cm, rm, wm, km := median(cold.mbps), median(raw.mbps), median(warm.mbps), median(kf.mbps)
		limit := min(rm, wm)
		coldMark := "met"
		if cm/limit < replayColdMin {
			coldMark, failed = "**missed**", failed+1
			if f := replayBound(raw, warm, replayFloorCPU(raw, warm)); f < replayColdMin {
				coldMark += fmt.Sprintf(" (at most %.2f on these cores)", f)
			}
		}
		var parts, segments float64
		fmt.Sscanf(sh, "parts=%g", &parts)
		segments = raw.extra("log-objects")
		warmTarget := "—"
		if parts >= replayWarmMinParts {
			warmTarget = fmt.Sprintf("≥ %.2f met", replayWarmMin)
			if wm/km < replayWarmMin {
				warmTarget, failed = fmt.Sprintf("≥ %.2f **missed**", replayWarmMin), failed+1
			}
		}
		all, gps, bound := cold.extra("GETs/segment"), cold.extra("read-GETs/segment"), (segments+parts)/segments
		readGets := "—" // a run from before the end checks were counted apart
		if !math.IsNaN(gps) {
			readGets = fmt.Sprintf("%.2f", gps)
		}
		getsMark := ""
		if all > bound*1.005 { // the bench prints 4 significant digits
			getsMark, failed = " **over**", failed+1
		}
		rss, rssBound := cold.extra("peak-RSS-MiB"), cold.extra("RSS-bound-MiB")
		rssMark := ""
		if rss > rssBound {
			rssMark, failed = " **over**", failed+1
		}
		endChecks := "—"
		if e := cold.extra("end-check-GETs/partition"); !math.IsNaN(e) {
			endChecks = fmt.Sprintf("%.2f", e)
		}
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.0f | %.2f; per run %s | ≥ %.2f %s | %.2f | %s | %.3f | %.2f (%.2f)%s; %s | %s | %.2f, %.2f | %.0f (%.0f)%s |\n",
			sh, cm, rm, wm, cm/limit, perRun(cold.mbps, pairMin(raw.mbps, warm.mbps)), replayColdMin, coldMark, wm/km, warmTarget,
			cold.extra("GETs/MiB"), all, bound, getsMark, readGets, endChecks,
			cold.extra("cpu-s/GB"), warm.extra("cpu-s/GB"), rss, rssBound, rssMark)
	}
	writeReplayCPU(b, res)
	writeReplayCapped(b, res)
	b.WriteString("\nCold first byte (`BenchmarkReplayFirstByte`): a new in-process fetch service per sample, the\n" +
		"partition's manifest cached (ListOffsets), then one Fetch (1 MiB) at a random offset; against one\n" +
		"4 MiB range GET of a random segment object in the same run. Round trips are the longest chain of\n" +
		"store GETs that ran one after another within the Fetch (its critical path).\n\n")
	b.WriteString("| first byte p50 | p99 | 4 MiB range GET p50 | p99 | p50 / GET p50 | target | round trips p50, max |\n|---|---|---|---|---|---|---|\n")
	fb := res["BenchmarkReplayFirstByte"]
	if fb == nil || math.IsNaN(fb.extra("p50-ms")) {
		b.WriteString("| not run | | | | | | |\n")
		return failed
	}
	p50, get := fb.extra("p50-ms"), fb.extra("get4MiB-p50-ms")
	mark := "met"
	if p50 > firstByteMaxOfGet*get {
		mark, failed = "**missed**", failed+1
	}
	fmt.Fprintf(b, "| %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.2f | ≤ %.1f %s | %.0f, %.0f |\n", p50, fb.extra("p99-ms"), get,
		fb.extra("get4MiB-p99-ms"), p50/get, firstByteMaxOfGet, mark, fb.extra("round-trips-p50"), fb.extra("round-trips-max"))
	return failed
}

// storeFaultRange is " (from LO to HI per GB in this run's reads)": the
// least and most store page faults per GB of any replay raw_get or cold
// read in res, or "" when none reported them.
func storeFaultRange(res map[string]*result) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, sh := range replayShapes {
		raw, cold, _, _ := replaySteps(res, sh)
		for _, r := range []*result{raw, cold} {
			if r == nil {
				continue
			}
			for _, v := range r.extras["store-faults/GB"] {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if lo > hi {
		return ""
	}
	return fmt.Sprintf(" (from %.0f to %.0f per GB in this run's reads)", lo, hi)
}

// replaySteps are the results of a replay shape's four steps.
func replaySteps(res map[string]*result, shape string) (raw, cold, warm, kfake *result) {
	pre := "BenchmarkReplay/" + shape + "/"
	return res[pre+"raw_get"], res[pre+"cold"], res[pre+"warm"], res[pre+"kfake"]
}

// replayBound is the best cold / limit a shape's cold read can reach on
// the cores its steps share when it needs cpu CPU seconds per GB served in
// all (the store, the fetch process, kcat): its bytes at cpu s/GB with
// every core busy all along, then the wait of its last Fetch at the log
// end (the data all read, nothing left to overlap it with), against the
// limit, the lesser of raw GET and warm (a cold read is not counted above
// it). NaN for runs that did not report the cores and the end wait.
func replayBound(raw, warm *result, cpu float64) float64 {
	// The read's bytes, MB/s × ns/op of each run (the same in every run;
	// the product of the two medians is not, for an even number of runs
	// far apart).
	per := make([]float64, min(len(warm.mbps), len(warm.nsop)))
	for i := range per {
		per[i] = warm.mbps[i] * warm.nsop[i] * 1e-12
	}
	gb := median(per)
	cores, wait := warm.extra("step-cores"), warm.extra("end-wait-ms")/1e3
	t := wait + gb*cpu/cores
	limit := min(median(raw.mbps), median(warm.mbps))
	return min(gb*1e3/t, limit) / limit
}

// replayFloorCPU is the least CPU per GB a cold read needs: the store's
// to serve the bytes (as it serves raw GETs of the same objects) and the
// warm read's (the fetch process serving them from its cache, kcat
// reading them), as if reading them from the store cost the fetch process
// nothing and the store nothing beyond the .log objects (no manifest, no
// index).
func replayFloorCPU(raw, warm *result) float64 {
	return raw.extra("store-cpu-s/GB") + warm.extra("cpu-s/GB") + warm.extra("kcat-cpu-s/GB")
}

// writeReplayCPU writes where each step of the replay curve spent the
// machine: every process's CPU seconds per GB served (the store, the
// reading client, the fetch process, kcat), how busy they kept the cores
// over the timed part, and the fetch service's requests per read and mean
// time per request. A step whose processes need C CPU seconds per GB in
// all cannot go faster than cores / C GB/s; one well below 100 % busy
// waits rather than computes.
func writeReplayCPU(b *strings.Builder, res map[string]*result) {
	b.WriteString("\nWhere the machine goes, per step: CPU seconds (user + system) per GB served of each process — the\n" +
		"store (MinIO), this process's minio-go GETs, the fetch process, kcat — and how busy they kept the\n" +
		"cores over the timed part (100 % = every core all along); the fetch service's requests per read\n" +
		"(Fetch, ListOffsets, Metadata…) and their mean time from reading one to writing its answer, fetch\n" +
		"waits included (each read's last Fetch, at the log end, waits its 100 ms max wait). The last two\n" +
		"columns bound cold by the cores: a cold read needing C CPU seconds per GB (all three processes) takes\n" +
		"at least its bytes × C / cores, every core busy all along, plus its last Fetch's wait at the log end,\n" +
		"with nothing left to overlap; its best cold / limit follows. The floor is the least a cold read can\n" +
		"need: the store's CPU for the same objects' raw GETs plus the warm read's (fetch serving from its\n" +
		"cache, kcat), as if reading from the store cost the fetch process nothing and the manifests and\n" +
		"indexes cost the store nothing; measured is the cold read's own CPU. A floor bound under the target\n" +
		"means no fetch service can reach it on these cores; a measured one under it, that this one needs\n" +
		"less CPU to, however well it overlaps its work. The store's minor page faults per GB (last column,\n" +
		"medians) are MinIO's own: its Go heap giving pages back to the kernel and faulting them in again,\n" +
		"which varies from read to read" + storeFaultRange(res) + ", and its CPU with it; on this PVM guest\n" +
		"one fault costs about 15 µs. Cache wait is the time the cold read's partition reads waited for\n" +
		"the store (`tiered_fetch_cache_wait_seconds`: chunks not yet in memory, their own GETs or\n" +
		"read-ahead's they joined, and the end checks' tails), summed over the partitions a Fetch reads\n" +
		"side by side, against the read's own time: a read whose partitions seldom wait was held back by\n" +
		"its client or the cores, not by the store falling behind.\n\n")
	b.WriteString("| shape | raw GET: store, client s/GB; busy | cold: store, fetch, kcat s/GB; busy | warm: fetch, kcat s/GB; busy | requests/read cold, warm | ms/request cold, warm | cache wait ms per cold read; its ms | cold CPU floor s/GB; best cold / limit | cold CPU measured s/GB; best cold / limit | store page faults/GB raw, cold |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, sh := range replayShapes {
		raw, cold, warm, _ := replaySteps(res, sh)
		if raw == nil || cold == nil || warm == nil || math.IsNaN(cold.extra("busy-%")) {
			fmt.Fprintf(b, "| %s | not run | | | | | | | | |\n", sh)
			continue
		}
		floor, measured := "—", "—" // runs without the cores and the end wait
		fc := replayFloorCPU(raw, warm)
		if fb := replayBound(raw, warm, fc); !math.IsNaN(fb) {
			mc := cold.extra("store-cpu-s/GB") + cold.extra("cpu-s/GB") + cold.extra("kcat-cpu-s/GB")
			floor = fmt.Sprintf("%.2f; %.2f", fc, fb)
			measured = fmt.Sprintf("%.2f; %.2f", mc, replayBound(raw, warm, mc))
		}
		faults := "—" // runs before the bench reported them
		if rf, cf := raw.extra("store-faults/GB"), cold.extra("store-faults/GB"); !math.IsNaN(rf) && !math.IsNaN(cf) {
			faults = fmt.Sprintf("%.0f, %.0f", rf, cf)
		}
		wait := "—" // runs before the bench reported it
		if w := cold.extra("cache-wait-ms/read"); !math.IsNaN(w) {
			wait = fmt.Sprintf("%.0f; %.0f", w, median(cold.nsop)/1e6)
		}
		fmt.Fprintf(b, "| %s | %.2f, %.2f; %.0f %% | %.2f, %.2f, %.2f; %.0f %% | %.2f, %.2f; %.0f %% | %.0f, %.0f | %.2f, %.2f | %s | %s | %s | %s |\n", sh,
			raw.extra("store-cpu-s/GB"), raw.extra("client-cpu-s/GB"), raw.extra("busy-%"),
			cold.extra("store-cpu-s/GB"), cold.extra("cpu-s/GB"), cold.extra("kcat-cpu-s/GB"), cold.extra("busy-%"),
			warm.extra("cpu-s/GB"), warm.extra("kcat-cpu-s/GB"), warm.extra("busy-%"),
			cold.extra("requests/read"), warm.extra("requests/read"), cold.extra("ms/request"), warm.extra("ms/request"), wait, floor, measured, faults)
	}
}

// writeReplayCapped writes the warm reads of the shapes whose responses
// exceed 16 MiB again from a fetch process with kafka.fetch_max_bytes
// 16 MiB (the warm_capped step), against the default 55 MiB cap.
func writeReplayCapped(b *strings.Builder, res map[string]*result) {
	b.WriteString("\nWhere a many-partition warm read's time goes: in kcat. librdkafka reads each Fetch response into\n" +
		"one buffer of its size; above glibc's 32 MiB mmap threshold that buffer is mapped afresh for each\n" +
		"response, and its pages fault in anew (kcat's minor page faults per GB read). At 1 MiB per\n" +
		"partition (librdkafka's default) a response of 32 partitions or more is that large. Capped at\n" +
		"16 MiB by `kafka.fetch_max_bytes` (Kafka's broker fetch.max.bytes; 55 MiB by default, which the\n" +
		"curve above keeps), the same warm read from a second fetch process (step warm_capped):\n\n")
	b.WriteString("| shape | warm MB/s | warm, kafka.fetch_max_bytes 16 MiB, MB/s | capped / warm | capped / kfake | kcat CPU s/GB warm, capped | kcat page faults/GB warm, capped |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, sh := range replayShapes {
		_, _, warm, kf := replaySteps(res, sh)
		capped := res["BenchmarkReplay/"+sh+"/warm_capped"]
		if warm == nil || kf == nil || capped == nil || len(warm.mbps) == 0 || len(capped.mbps) == 0 || len(kf.mbps) == 0 {
			continue
		}
		wm, cm := median(warm.mbps), median(capped.mbps)
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.2f | %.2f | %.2f, %.2f | %.0f, %.0f |\n", sh, wm, cm, cm/wm, cm/median(kf.mbps),
			warm.extra("kcat-cpu-s/GB"), capped.extra("kcat-cpu-s/GB"), warm.extra("kcat-faults/GB"), capped.extra("kcat-faults/GB"))
	}
}

// writeGroups writes the consumer-group figures (#16): an OffsetCommit on
// MinIO (latency percentiles, PUTs and store reads per commit;
// fetchcache/groups BenchmarkCommitMinIO) and the time ten members take to
// form a Stable generation (BenchmarkGroupStabilise10).
func writeGroups(b *strings.Builder, res map[string]*result) {
	b.WriteString("\n## Consumer groups (#16)\n\n")
	b.WriteString("An OffsetCommit of one member (8 partitions) end to end on MinIO: the coordinator's checks, the\n" +
		"conditional PUT of the group object, the answer (fetchcache/groups/bench_test.go). Store reads per\n" +
		"commit count every GET/range GET/HEAD the commit path makes (the group object is read once, when\n" +
		"the group is first loaded, then never): group traffic adds no GET to the store, and the Fetch path\n" +
		"never touches group state.\n\n")
	b.WriteString("| figure | p50 | p99 | PUTs/commit | store reads/commit | runs |\n|---|---|---|---|---|---|\n")
	if r := res["BenchmarkCommitMinIO"]; r != nil {
		fmt.Fprintf(b, "| OffsetCommit on MinIO | %.1f ms | %.1f ms | %.3f | %.3f | %d |\n", r.extra("p50-ms"), r.extra("p99-ms"),
			r.extra("PUTs/commit"), r.extra("GETs/commit"), len(r.nsop))
	} else {
		b.WriteString("| OffsetCommit on MinIO | not run | | | | |\n")
	}
	b.WriteString("\nTen members that start together until the group is Stable with every member assigned (JoinGroup\n" +
		"with MEMBER_ID_REQUIRED, rejoin, SyncGroup): with no initial rebalance delay, and with Kafka's default\n" +
		"group.initial.rebalance.delay.ms of 3 s, which dominates (members arriving during it extend it once).\n\n")
	b.WriteString("| initial rebalance delay | time to Stable | runs |\n|---|---|---|\n")
	for _, c := range []struct{ name, label string }{{"initial_delay=0", "0"}, {"initial_delay=3s", "3 s"}} {
		if r := res["BenchmarkGroupStabilise10/"+c.name]; r != nil {
			fmt.Fprintf(b, "| %s | %.3f s | %d |\n", c.label, r.extra("s-to-stable"), len(r.nsop))
		} else {
			fmt.Fprintf(b, "| %s | not run | |\n", c.label)
		}
	}
}

// pairMin is the element-wise lesser of a and b (the limit of each run).
func pairMin(a, b []float64) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		out[i] = min(a[i], b[i])
	}
	return out
}

func main() {
	in := flag.String("in", "-", "go test -bench output")
	out := flag.String("out", "BENCHMARKS.md", "report to write")
	flag.Parse()
	var r io.Reader = os.Stdin
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
		defer f.Close()
		r = f
	}
	res, cpu, err := parse(r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\nWritten by `scripts/bench` on %s. Machine: %s, %d CPUs, %s/%s, %s.\n",
		time.Now().UTC().Format("2006-01-02"), cpu, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	b.WriteString("Each figure is the median of the runs, and its baseline was measured in the same run on the same bytes.\n")
	b.WriteString("These machines are shared and noisy; ratios matter, absolute numbers less so.\n\n")
	b.WriteString("The verdict uses the ratio of the medians; \"per run\" is the median (and range) of the ratios of\nthe i-th figure to the i-th baseline, which the #2 and integration benchmarks measure back to back\n(scripts/bench runs them one pass per run).\n")
	b.WriteString(appendNote(res))
	b.WriteString("BenchmarkUpload syncs and drops the page cache before each sub-benchmark (as root), so raw_put and\nthe uploader start from the same state (integration/upload_bench_test.go says why).\n\n")
	b.WriteString("| issue | what | figure MB/s | baseline MB/s | ratio | per run | target | allocs/op |\n|---|---|---|---|---|---|---|---|\n")
	failed := 0
	for _, p := range pairs {
		f := res[p.figure]
		if p.baseline == "" {
			if f == nil || len(f.mbps) == 0 {
				fmt.Fprintf(&b, "| %s | %s | not run | — | — | — | ≥ %.0f MB/s | |\n", p.issue, p.what, p.min)
				continue
			}
			fm := median(f.mbps)
			mark := "met"
			if fm < p.min {
				mark = "**missed**"
				failed++
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | — | — | — | ≥ %.0f MB/s %s | %.0f |\n", p.issue, p.what, fm, p.min, mark, median(f.alloc))
			continue
		}
		base := res[p.baseline]
		if f == nil || base == nil || len(f.mbps) == 0 || len(base.mbps) == 0 {
			fmt.Fprintf(&b, "| %s | %s | not run | | | | ≥ %.2f | |\n", p.issue, p.what, p.min)
			continue
		}
		fm, bm := median(f.mbps), median(base.mbps)
		ratio := fm / bm
		mark := "met"
		if ratio < p.min {
			mark = "**missed**"
			failed++
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.2f | %s | ≥ %.2f %s | %.0f |\n", p.issue, p.what, fm, bm, ratio, perRun(f.mbps, base.mbps), p.min, mark, median(f.alloc))
	}
	writeCost(&b, res)
	failed += writeReplay(&b, res)
	writeGroups(&b, res)
	b.WriteString("\n## All results (median of runs)\n\n| benchmark | MB/s | ns/op | allocs/op | runs | other |\n|---|---|---|---|---|---|\n")
	names := make([]string, 0, len(res))
	for n := range res {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		r := res[n]
		var extra []string
		for unit, v := range r.extras {
			extra = append(extra, fmt.Sprintf("%.3g %s", median(v), unit))
		}
		sort.Strings(extra)
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f | %d | %s |\n", n, median(r.mbps), median(r.nsop), median(r.alloc), len(r.nsop), strings.Join(extra, ", "))
	}
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
	fmt.Print(b.String())
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "benchreport: %d target(s) missed\n", failed)
	}
}

// appendNote says how BenchmarkAppend was run: the batches each side
// wrote per run (scripts/bench APPEND_BATCHES) and their bytes, from the
// log's results; "" without them.
func appendNote(res map[string]*result) string {
	r := res["BenchmarkAppend/log"]
	if r == nil || len(r.iters) == 0 || len(r.mbps) == 0 || len(r.nsop) == 0 {
		return ""
	}
	n := median(r.iters)
	perOp := median(r.mbps) * median(r.nsop) / 1e3 // bytes per batch
	return fmt.Sprintf("BenchmarkAppend's raw write keeps every byte it writes, as the log keeps its segments, and each\n"+
		"writes a fixed %.0f batches (%.0f MB; scripts/bench APPEND_BATCHES) below the kernel's background\n"+
		"writeback threshold, so neither is slowed by writeback the other escapes.\n", n, n*perOp/1e6)
}
